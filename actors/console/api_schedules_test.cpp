// The API's recurring schedules (api_schedules.cpp) against a fake node: each route sends the
// CLI's ScheduleRequest and renders the node's answer; a malformed body is a 400 naming its
// field and asks the node nothing; a node's refusal keeps its status.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/console/console_api.hpp"
#include "tests/support/console_api_fake_node.hpp"

namespace proctor {
namespace {

using json = nlohmann::json;
using testing::api_request;
using testing::fake_node;

console_reply call(fake_node& n, const std::string& method, const std::string& path,
                   std::string body = "", std::multimap<std::string, std::string> params = {}) {
  return handle_console_api(
    api_request(method, path, std::move(params), console_auth::granted, std::move(body)),
    n.caller(), 1'764'052'812'345, {});
}

TEST(http_api_schedules, add_sends_every_field_and_answers_the_schedule) {
  fake_node n;
  n.answer = [](const pb::Request& r) {
    executor_answer a;
    a.response.emplace();
    a.response->set_text("added");
    auto* x = a.response->add_schedules();
    *x->mutable_schedule() = r.schedule().spec();
    x->set_next_fire_ms(1'764'052'900'000);
    return a;
  };
  auto r = call(n, "POST", "/api/schedules",
                R"({"name":"sweep","cron":"*/5 * * * *","type":"cleanup.sweep",)"
                R"("args":{"days":1},"priority":2,"overlap":"buffer-one","catch_up":"all",)"
                R"("catch_up_window_ms":7200000,"jitter_ms":30000,"zone":"UTC","paused":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(n.asked.size(), 1u);
  const auto& sr = n.asked[0].schedule();
  EXPECT_EQ(sr.op(), pb::ScheduleRequest::ADD);
  EXPECT_EQ(sr.spec().name(), "sweep");
  EXPECT_EQ(sr.spec().cron(), "*/5 * * * *");
  EXPECT_EQ(sr.spec().type(), "cleanup.sweep");
  EXPECT_EQ(json::parse(sr.spec().args_json()), json::parse(R"({"days":1})"));
  EXPECT_EQ(sr.spec().priority(), 2);
  EXPECT_EQ(sr.spec().overlap(), pb::Schedule::BUFFER_ONE);
  EXPECT_EQ(sr.spec().catch_up(), pb::Schedule::CATCH_UP_ALL);
  EXPECT_EQ(sr.spec().catch_up_window_ms(), 7'200'000u);
  EXPECT_EQ(sr.spec().jitter_ms(), 30'000u);
  EXPECT_TRUE(sr.spec().paused());
  auto j = json::parse(r.body);
  EXPECT_EQ(j["name"], "sweep");
  EXPECT_EQ(j["text"], "added");
  EXPECT_EQ(j["schedule"]["overlap"], "buffer-one");
  EXPECT_EQ(j["schedule"]["catch_up"], "all");
  EXPECT_EQ(j["schedule"]["next_fire_ms"], 1'764'052'900'000);
  EXPECT_EQ(j["schedule"]["args"]["days"], 1);
}

TEST(http_api_schedules, a_malformed_add_is_a_400_naming_its_field) {
  fake_node n;
  const std::pair<const char*, const char*> cases[] = {
    {R"({"cron":"* * * * *","type":"t"})", "name"},
    {R"({"name":"a","type":"t"})", "cron"},
    {R"({"name":"a","cron":"* * * * *"})", "type"},
    {R"({"name":"a","cron":"* * * * *","type":"t","overlap":"sometimes"})", "overlap"},
    {R"({"name":"a","cron":"* * * * *","type":"t","catch_up":1})", "catch_up"},
    {R"({"name":"a","cron":"* * * * *","type":"t","jitter_ms":-1})", "jitter_ms"},
    {R"({"name":"a","cron":"* * * * *","type":"t","paused":"yes"})", "paused"},
    {R"({"name":"a","cron":"* * * * *","type":"t","args":[1]})", "args"},
    {R"({"name":"a","cron":"* * * * *","type":"t","crn":"x"})", "crn"},
  };
  for (const auto& [body, field] : cases) {
    auto r = call(n, "POST", "/api/schedules", body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(json::parse(r.body)["field"], field) << r.body;
  }
  EXPECT_TRUE(n.asked.empty()) << "a malformed body reached the node";
}

TEST(http_api_schedules, changes_and_reads_name_their_schedule) {
  fake_node n;
  n.answer = [](const pb::Request& r) {
    executor_answer a;
    a.response.emplace();
    if (r.schedule().name() == "nope") {
      a.response->set_code(pb::Response::NOT_FOUND);
      a.response->set_error("no schedule 'nope'");
    }
    if (r.schedule().op() == pb::ScheduleRequest::TRIGGER)
      a.response->set_id(77);
    return a;
  };
  for (auto [verb, op] : {std::pair{"pause", pb::ScheduleRequest::PAUSE},
                          std::pair{"resume", pb::ScheduleRequest::RESUME},
                          std::pair{"delete", pb::ScheduleRequest::DELETE},
                          std::pair{"trigger", pb::ScheduleRequest::TRIGGER}}) {
    auto r = call(n, "POST", std::string("/api/schedules/") + verb, R"({"name":"sweep"})");
    ASSERT_EQ(r.status, 200) << verb << ": " << r.body;
    EXPECT_EQ(n.asked.back().schedule().op(), op);
    EXPECT_EQ(n.asked.back().schedule().name(), "sweep");
    EXPECT_EQ(json::parse(r.body)["name"], "sweep");
    auto missing = call(n, "POST", std::string("/api/schedules/") + verb, R"({"name":"nope"})");
    EXPECT_EQ(missing.status, 404) << missing.body;
    auto empty = call(n, "POST", std::string("/api/schedules/") + verb, "{}");
    EXPECT_EQ(empty.status, 400);
  }
  auto t = call(n, "POST", "/api/schedules/trigger", R"({"name":"sweep"})");
  EXPECT_EQ(json::parse(t.body)["id"], 77);
  auto list = call(n, "GET", "/api/schedules");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(n.asked.back().schedule().op(), pb::ScheduleRequest::LIST);
  EXPECT_EQ(list.body, "[]");
  call(n, "GET", "/api/schedules", "", {{"name", "sweep"}});
  EXPECT_EQ(n.asked.back().schedule().op(), pb::ScheduleRequest::SHOW);
  EXPECT_EQ(n.asked.back().schedule().name(), "sweep");
}

}  // namespace
}  // namespace proctor
