// A parent reads its children's results as messages (child_result::result<M>).
#include <gtest/gtest.h>

#include <proctor/context.hpp>
#include <proctor/demo.pb.h>

namespace proctor {
namespace {

child_result ended(std::string result_json, proc_state state = proc_state::success) {
  child_result r;
  r.id = 42;
  r.state = state;
  r.result_json = std::move(result_json);
  return r;
}

TEST(child_result_test, parses_the_result_as_the_message_given) {
  pb::NoopData sent;
  sent.set_steps(3);
  sent.set_step(2);
  auto o = outcome::done(sent);  // as the child's last step returns it
  auto got = ended(o.result_json()).result<pb::NoopData>();
  EXPECT_EQ(got.steps(), 3);
  EXPECT_EQ(got.step(), 2);
}

TEST(child_result_test, no_result_is_a_default_message) {
  auto got = ended("").result<pb::NoopData>();
  EXPECT_EQ(got.steps(), 0);
}

TEST(child_result_test, another_message_is_a_business_failure_naming_the_child_and_type) {
  pb::FlakyData other;
  other.set_crash_times(1);
  auto r = ended(outcome::done(other).result_json());
  try {
    (void)r.result<pb::NoopData>();
    FAIL() << "a FlakyData result parsed as a NoopData";
  } catch (const procedure_failure& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("child 42"), std::string::npos) << what;
    EXPECT_NE(what.find("proctor.pb.NoopData"), std::string::npos) << what;
  }
  pb::NoopData m;
  std::string why;
  EXPECT_FALSE(r.parse_result(m, &why));
  EXPECT_NE(why.find("is not a proctor.pb.NoopData"), std::string::npos) << why;
}

TEST(child_result_test, a_child_that_did_not_succeed_has_no_result) {
  auto r = ended("", proc_state::rolledback);
  r.error = "out of stock";
  std::string why;
  pb::NoopData m;
  EXPECT_FALSE(r.parse_result(m, &why));
  EXPECT_NE(why.find("ROLLEDBACK (out of stock)"), std::string::npos) << why;
  EXPECT_THROW((void)r.result<pb::NoopData>(), procedure_failure);
}

// Typed event payloads, as typed child results: ctx.event<M>().
TEST(child_result_test, an_event_payload_reads_as_its_message_or_says_why_not) {
  context ctx;
  ctx.id_ = 7;
  ctx.event_payload_ = R"({"steps":4})";
  EXPECT_EQ(ctx.event<pb::NoopData>().steps(), 4);
  ctx.event_payload_ = "null";  // an event sent without a payload
  EXPECT_EQ(ctx.event<pb::NoopData>().steps(), 0);
  ctx.event_payload_ = R"({"crash_times":1})";
  pb::NoopData m;
  std::string why;
  EXPECT_FALSE(ctx.parse_event(m, &why));
  EXPECT_NE(why.find("procedure 7's event payload is not a proctor.pb.NoopData"), std::string::npos)
    << why;
  EXPECT_THROW((void)ctx.event<pb::NoopData>(), procedure_failure);
}

}  // namespace
}  // namespace proctor
