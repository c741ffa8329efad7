#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/demo.pb.h>
#include <proctor/registry.hpp>
#include <proctor/state_machine.hpp>

#include "procedures/demo.hpp"

namespace proctor {
namespace {

struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/proctor_registry_test_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// A minimal type whose validate() refuses a negative `steps` with a fixed reason.
class counting : public state_machine<pb::NoopData, pb::NoopState> {
public:
  counting() {
    on(
      pb::NOOP_STEP, [](pb::NoopData&, context&) { return outcome::done(); },
      [](pb::NoopData&, context&) {});
  }
  std::string validate() const override {
    return typed_data().steps() < 0 ? "steps must not be negative" : "";
  }
};

/// Another type, to tell registrations apart.
class other : public state_machine<pb::NoopData, pb::NoopState> {
public:
  other() {
    on(
      pb::NOOP_STEP, [](pb::NoopData&, context&) { return outcome::fail("other"); },
      [](pb::NoopData&, context&) {});
  }
};

/// A type that declares a lock.
class locking : public state_machine<pb::NoopData, pb::NoopState> {
public:
  locking() {
    on(
      pb::NOOP_STEP, [](pb::NoopData&, context&) { return outcome::done(); },
      [](pb::NoopData&, context&) {});
  }
  lock_set locks() const override { return {resource_lock::exclusive_on("ns")}; }
};

const pb::NoopData& noop_data(procedure& p) {
  return dynamic_cast<pb::NoopData&>(p.data());
}

bool one_line(const std::string& s) {
  return s.find('\n') == std::string::npos;
}

TEST(registry_test, add_and_find) {
  registry r;
  EXPECT_EQ(r.find("t.counting"), nullptr);
  supervision_policy sup;
  sup.max_restarts = 7;
  retry_policy retry;
  retry.max_attempts = 4;
  ASSERT_TRUE(r.add<counting>("t.counting", 3, sup, retry));
  const auto* t = r.find("t.counting");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name, "t.counting");
  EXPECT_EQ(t->version, 3u);
  EXPECT_EQ(t->supervision.max_restarts, 7);
  EXPECT_EQ(t->retry.max_attempts, 4);
  ASSERT_TRUE(t->make);
  auto p = t->make();
  ASSERT_NE(p, nullptr);
  EXPECT_NE(dynamic_cast<counting*>(p.get()), nullptr);
  EXPECT_EQ(r.find("t.count"), nullptr);
  EXPECT_EQ(r.find("t.counting2"), nullptr);
  EXPECT_EQ(r.find(""), nullptr);
}

TEST(registry_test, policies_are_declared_by_builder) {
  registry r;
  r.add<counting>("t.counting", 2)
    .retry({.kind = retry_policy::backoff::linear,
            .delay = std::chrono::milliseconds{7},
            .max_attempts = 5,
            .max_attempts_past_no_return = 9})
    .supervision({.strategy = restart_strategy::rest_for_one,
                  .max_restarts = 11,
                  .backoff_min = std::chrono::milliseconds{3}})
    .on_node_loss(node_loss_policy::fail_after(std::chrono::seconds{4}))
    .child_only();
  const auto* t = r.find("t.counting");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->version, 2u);
  EXPECT_EQ(t->retry.kind, retry_policy::backoff::linear);
  EXPECT_EQ(t->retry.delay, std::chrono::milliseconds{7});
  EXPECT_EQ(t->retry.max_attempts, 5);
  EXPECT_EQ(t->retry.max_attempts_past_no_return, 9);
  EXPECT_EQ(t->supervision.strategy, restart_strategy::rest_for_one);
  EXPECT_EQ(t->supervision.max_restarts, 11);
  EXPECT_EQ(t->supervision.backoff_min, std::chrono::milliseconds{3});
  EXPECT_EQ(t->node_loss.deadline, std::chrono::milliseconds{4000});
  EXPECT_FALSE(t->node_loss.waits());
  EXPECT_TRUE(t->child_only);
  // Unset, each keeps its default.
  r.add<counting>("t.plain");
  const auto* plain = r.find("t.plain");
  EXPECT_EQ(plain->retry.max_attempts, retry_policy{}.max_attempts);
  EXPECT_EQ(plain->supervision.max_restarts, supervision_policy{}.max_restarts);
  EXPECT_TRUE(plain->node_loss.waits());
}

TEST(registry_test, add_finds_out_whether_a_type_declares_locks) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  ASSERT_TRUE(r.add<locking>("t.locking"));
  EXPECT_FALSE(r.find("t.counting")->declares_locks);
  EXPECT_TRUE(r.find("t.locking")->declares_locks);
  // Registered by hand, a type is assumed to declare locks (always safe).
  procedure_type t;
  t.name = "t.manual";
  t.make = [] { return std::unique_ptr<procedure>(new counting()); };
  EXPECT_TRUE(t.declares_locks);
  ASSERT_TRUE(r.add(std::move(t)));
  EXPECT_TRUE(r.find("t.manual")->declares_locks);
}

TEST(registry_test, a_type_is_declared_nonblocking_where_it_is_added) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.blocking"));
  ASSERT_TRUE(r.add<counting>("t.quick").nonblocking());
  EXPECT_FALSE(r.find("t.blocking")->nonblocking);
  EXPECT_TRUE(r.find("t.quick")->nonblocking);
  // The demo types that only compute are; those that touch a disk or wait are not.
  registry demo;
  register_demo_procedures(demo);
  EXPECT_TRUE(demo.find("demo.noop")->nonblocking);
  EXPECT_TRUE(demo.find("demo.fanout")->nonblocking);
  EXPECT_FALSE(demo.find("demo.ledger")->nonblocking);
  EXPECT_FALSE(demo.find("demo.timer")->nonblocking);
}

TEST(registry_test, default_version_is_one) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  ASSERT_NE(r.find("t.counting"), nullptr);
  EXPECT_EQ(r.find("t.counting")->version, 1u);
}

TEST(registry_test, duplicate_name_throws_naming_the_type_and_keeps_the_first) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.x", 1));
  try {
    r.add<other>("t.x", 2);
    ADD_FAILURE() << "a second add of t.x did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "procedure type 't.x' is already registered (version 1); each name is "
                           "registered once");
  }
  EXPECT_THROW(
    r.add(procedure_type{"t.x", 5, [] { return std::unique_ptr<procedure>(new other()); }, {}, {}}),
    std::logic_error);
  const auto* t = r.find("t.x");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->version, 1u);
  auto p = t->make();
  EXPECT_NE(dynamic_cast<counting*>(p.get()), nullptr);
  EXPECT_EQ(r.names(), std::vector<std::string>{"t.x"});
}

TEST(registry_test, add_procedure_type_directly) {
  registry r;
  ASSERT_TRUE(r.add(
    procedure_type{"t.direct", 9, [] { return std::unique_ptr<procedure>(new other()); }, {}, {}}));
  const auto* t = r.find("t.direct");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->version, 9u);
  std::string err;
  auto p = r.make_from_json("t.direct", "", &err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_NE(dynamic_cast<other*>(p.get()), nullptr);
}

TEST(registry_test, names_are_sorted) {
  registry r;
  ASSERT_TRUE(r.add<counting>("zeta"));
  ASSERT_TRUE(r.add<counting>("alpha"));
  ASSERT_TRUE(r.add<counting>("Mid"));
  ASSERT_TRUE(r.add<counting>("alpha.b"));
  EXPECT_EQ(r.names(), (std::vector<std::string>{"Mid", "alpha", "alpha.b", "zeta"}));
  EXPECT_TRUE(registry{}.names().empty());
}

TEST(registry_test, demo_procedures_are_registered) {
  registry r;
  register_demo_procedures(r);
  EXPECT_EQ(r.names(), (std::vector<std::string>{
                         "demo.call", "demo.dispatch", "demo.fanout", "demo.flaky", "demo.forward",
                         "demo.ledger", "demo.ledger.impatient", "demo.noop", "demo.race",
                         "demo.reconcile", "demo.timer", "demo.timers", "demo.wait_event"}));
  for (const auto& n : r.names()) {
    ASSERT_NE(r.find(n), nullptr) << n;
    EXPECT_EQ(r.find(n)->version, 1u) << n;
  }
}

TEST(registry_test, make_from_json_parses_args) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  std::string err;
  auto p = r.make_from_json("t.counting", R"({"steps": 5, "step": 2})", &err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(noop_data(*p).steps(), 5);
  EXPECT_EQ(noop_data(*p).step(), 2);
  EXPECT_NE(dynamic_cast<counting*>(p.get()), nullptr);
}

TEST(registry_test, make_from_json_empty_args_mean_empty_object) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  std::string err;
  auto p = r.make_from_json("t.counting", "", &err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(noop_data(*p).steps(), 0);
  EXPECT_EQ(noop_data(*p).step(), 0);
  auto q = r.make_from_json("t.counting", "{}", &err);
  ASSERT_NE(q, nullptr) << err;
}

TEST(registry_test, make_from_json_gives_fresh_instances) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  std::string err;
  auto a = r.make_from_json("t.counting", R"({"steps": 1})", &err);
  auto b = r.make_from_json("t.counting", R"({"steps": 2})", &err);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(noop_data(*a).steps(), 1);
  EXPECT_EQ(noop_data(*b).steps(), 2);
}

TEST(registry_test, make_from_json_unknown_type) {
  registry r;
  register_demo_procedures(r);
  std::string err;
  EXPECT_EQ(r.make_from_json("x", "{}", &err), nullptr);
  // Nothing near: the known types are listed.
  EXPECT_EQ(err, "unknown procedure type 'x' (known types: demo.call, demo.dispatch, "
                 "demo.fanout, demo.flaky, demo.forward, demo.ledger, demo.ledger.impatient, "
                 "demo.noop, demo.race, demo.reconcile, demo.timer, demo.timers, ... 1 more)");
  err.clear();
  // A near name (case and a typo) is suggested instead.
  EXPECT_EQ(r.make_from_json("demo.Noop", "{}", &err), nullptr);
  EXPECT_EQ(err, "unknown procedure type 'demo.Noop' (did you mean 'demo.noop'?)");
  EXPECT_EQ(r.make_from_json("demo.leger", "{}", &err), nullptr);
  EXPECT_EQ(err, "unknown procedure type 'demo.leger' (did you mean 'demo.ledger'?)");
  EXPECT_EQ(r.make_from_json("demo.waitevent", "{}", &err), nullptr);
  EXPECT_EQ(err, "unknown procedure type 'demo.waitevent' (did you mean 'demo.wait_event'?)");
  EXPECT_TRUE(one_line(err));
}

TEST(registry_test, unknown_type_lists_at_most_twelve_names) {
  registry r;
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(r.add<counting>("type." + std::string(1, static_cast<char>('a' + i)) + "xxxxxxxx"));
  std::string err;
  EXPECT_EQ(r.make_from_json("something.else.entirely", "{}", &err), nullptr);
  EXPECT_NE(err.find("known types: type.axxxxxxxx, "), std::string::npos) << err;
  EXPECT_NE(err.find(", ... 8 more)"), std::string::npos) << err;
  EXPECT_EQ(registry{}.unknown_type_error("x"),
            "unknown procedure type 'x' (no types are registered)");
}

TEST(registry_test, make_from_json_unknown_field_is_rejected) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  std::string err;
  EXPECT_EQ(r.make_from_json("t.counting", R"({"steps": 1, "bogus": 2})", &err), nullptr);
  EXPECT_EQ(err.rfind("malformed args JSON for 't.counting': ", 0), 0u) << err;
  EXPECT_NE(err.find("bogus"), std::string::npos) << err;
  EXPECT_TRUE(one_line(err)) << "not one line: [" << err << "]";
}

TEST(registry_test, make_from_json_wrong_type_is_rejected) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  std::string err;
  EXPECT_EQ(r.make_from_json("t.counting", R"({"steps": "many"})", &err), nullptr);
  EXPECT_EQ(err.rfind("malformed args JSON for 't.counting': ", 0), 0u) << err;
  EXPECT_TRUE(one_line(err)) << "not one line: [" << err << "]";
}

TEST(registry_test, make_from_json_malformed_json_is_rejected) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  for (std::string bad : {"{", "{\"steps\": 1", "not json", "[1, 2]"}) {
    std::string err;
    EXPECT_EQ(r.make_from_json("t.counting", bad, &err), nullptr) << bad;
    EXPECT_EQ(err.rfind("malformed args JSON for 't.counting': ", 0), 0u) << bad << " -> " << err;
  }
}

TEST(registry_test, make_from_json_malformed_json_reason_is_one_line) {
  // protobuf's JSON syntax errors span several lines (message, context, caret); the
  // registry promises a one-line reason.
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  for (std::string bad : {"{", "{\"steps\": 1", "not json", "{\"steps\" 1}"}) {
    std::string err;
    ASSERT_EQ(r.make_from_json("t.counting", bad, &err), nullptr) << bad;
    EXPECT_TRUE(one_line(err)) << "not one line: [" << err << "]";
    EXPECT_GT(err.size(), std::string("malformed args JSON for 't.counting': ").size()) << err;
  }
}

TEST(registry_test, make_from_json_validate_errors_surface) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  std::string err;
  EXPECT_EQ(r.make_from_json("t.counting", R"({"steps": -1})", &err), nullptr);
  EXPECT_EQ(err, "invalid args for 't.counting': steps must not be negative");
}

TEST(registry_test, make_from_json_demo_validation) {
  registry r;
  register_demo_procedures(r);
  std::string err;
  EXPECT_EQ(r.make_from_json("demo.ledger", "{}", &err), nullptr);
  EXPECT_EQ(err, "invalid args for 'demo.ledger': ledger_dir is required");
  EXPECT_EQ(r.make_from_json("demo.wait_event", "{}", &err), nullptr);
  EXPECT_EQ(err, "invalid args for 'demo.wait_event': key is required");
  EXPECT_EQ(r.make_from_json("demo.fanout", R"({"children": -1})", &err), nullptr);
  EXPECT_EQ(err, "invalid args for 'demo.fanout': children must be within 0..1000000");
  err.clear();
  EXPECT_NE(r.make_from_json("demo.noop", R"({"steps": 2})", &err), nullptr);
  EXPECT_EQ(err, "");
}

TEST(registry_test, make_from_bytes_round_trip) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  pb::NoopData d;
  d.set_steps(11);
  d.set_step(4);
  std::string err;
  auto p = r.make_from_bytes("t.counting", d.SerializeAsString(), &err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_NE(dynamic_cast<counting*>(p.get()), nullptr);
  EXPECT_EQ(noop_data(*p).steps(), 11);
  EXPECT_EQ(noop_data(*p).step(), 4);
  EXPECT_EQ(p->data().SerializeAsString(), d.SerializeAsString());
}

TEST(registry_test, make_from_bytes_of_json_made_procedure_round_trips) {
  temp_dir dir;
  registry r;
  register_demo_procedures(r);
  std::string err;
  auto a = r.make_from_json("demo.ledger",
                            R"({"ledger_dir": ")" + dir.path
                              + R"(", "steps": 4, "fail_at": 2, "children": 3, "depth": 1})",
                            &err);
  ASSERT_NE(a, nullptr) << err;
  auto bytes = a->data().SerializeAsString();
  auto b = r.make_from_bytes("demo.ledger", bytes, &err);
  ASSERT_NE(b, nullptr) << err;
  const auto& d = dynamic_cast<pb::LedgerData&>(b->data());
  EXPECT_EQ(d.ledger_dir(), dir.path);
  EXPECT_TRUE(d.has_steps());
  EXPECT_EQ(d.steps(), 4);
  EXPECT_TRUE(d.has_fail_at());
  EXPECT_EQ(d.fail_at(), 2);
  EXPECT_EQ(d.children(), 3);
  EXPECT_EQ(d.depth(), 1);
  EXPECT_EQ(b->data().SerializeAsString(), bytes);
}

TEST(registry_test, make_from_bytes_empty_is_default_data) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  std::string err;
  auto p = r.make_from_bytes("t.counting", "", &err);
  ASSERT_NE(p, nullptr) << err;
  EXPECT_EQ(noop_data(*p).steps(), 0);
}

TEST(registry_test, make_from_bytes_errors) {
  registry r;
  ASSERT_TRUE(r.add<counting>("t.counting"));
  std::string err;
  EXPECT_EQ(r.make_from_bytes("nope", "", &err), nullptr);
  EXPECT_EQ(err, "unknown procedure type 'nope' (known types: t.counting)");
  err.clear();
  // A varint tag that never ends.
  EXPECT_EQ(r.make_from_bytes("t.counting", std::string("\xff\xff\xff\xff", 4), &err), nullptr);
  EXPECT_EQ(err, "unparsable data for 't.counting'");
}

}  // namespace
}  // namespace proctor

namespace proctor {
namespace {

TEST(registry_test, compact_after_is_kept_and_a_threshold_below_two_is_refused) {
  registry r;
  r.add<counting>("loop").compact_after(500);
  ASSERT_NE(r.find("loop"), nullptr);
  EXPECT_EQ(r.find("loop")->compact_after, 500u);
  r.add<counting>("plain");
  EXPECT_EQ(r.find("plain")->compact_after, 0u);  // the node's --compact-after decides
  try {
    r.add<counting>("tiny").compact_after(1);
    ADD_FAILURE() << "compact_after(1) was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "procedure type 'tiny': compact_after(records) needs at least 2 records");
  }
}

}  // namespace
}  // namespace proctor
