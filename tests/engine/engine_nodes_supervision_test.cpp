// Supervision across nodes, in one process: a child placed on another node that crashes is
// restarted there from its journal as its parent's type says (restart intensity and
// back-off travel with the spawn), and past that intensity its tree fails and rolls back.
#include <gtest/gtest.h>

#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "tests/engine/engine_nodes_fixture.hpp"

namespace proctor::testing {
namespace {

/// Spawns one demo.flaky on node b that crashes `children` times (LedgerData reused as
/// data: ledger_dir and children), then succeeds if it did.
class flaky_parent : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  flaky_parent() {
    on(pb::LEDGER_STEP, &flaky_parent::spawn_step, &flaky_parent::nothing);
    on(pb::LEDGER_JOIN, &flaky_parent::join, &flaky_parent::nothing);
  }

private:
  outcome spawn_step(pb::LedgerData& d, context&) {
    pb::FlakyData c;
    c.set_crash_times(d.children());
    c.set_ledger_dir(d.ledger_dir());
    std::vector<child_spec> kids;
    kids.push_back(child("demo.flaky", c).on_node("b"));
    return spawn(std::move(kids), pb::LEDGER_JOIN);
  }
  outcome join(pb::LedgerData&, context& ctx) {
    for (const auto& c : ctx.children())
      if (c.state != proc_state::success)
        return fail("child " + std::to_string(c.id) + " did not succeed: " + c.error);
    return done();
  }
  void nothing(pb::LedgerData&, context&) {}
};

class remote_supervision : public nodes_fixture {
protected:
  void SetUp() override {
    supervision_policy strict;  // demo.flaky's own policy allows 3 restarts
    strict.max_restarts = 1;
    strict.backoff_min = std::chrono::milliseconds{1};
    types_.add<flaky_parent>("test.strict_parent", 1, strict);
    supervision_policy lenient;
    lenient.max_restarts = 5;
    lenient.backoff_min = std::chrono::milliseconds{1};
    types_.add<flaky_parent>("test.lenient_parent", 1, lenient);
    nodes_fixture::SetUp();
  }

  pb::ProcStatus run(const std::string& type, int crashes) {
    pb::Request req;
    req.mutable_submit()->set_type(type);
    req.mutable_submit()->set_args_json(R"({"ledger_dir":")" + dir_ + R"(/ledger","children":)"
                                        + std::to_string(crashes) + "}");
    auto r = call("a", req);
    EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
    return wait("a", r.id());
  }
};

TEST_F(remote_supervision, a_remote_child_is_restarted_within_its_parents_intensity) {
  // Four crashes: more than demo.flaky's own 3, within the parent's 5.
  auto s = run("test.lenient_parent", 4);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
}

TEST_F(remote_supervision, past_its_parents_intensity_a_remote_child_fails_its_tree) {
  // Two crashes: within demo.flaky's own 3, more than the parent's 1.
  auto s = run("test.strict_parent", 2);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK) << s.error();
  EXPECT_NE(s.error().find("crashed more than 1 times"), std::string::npos) << s.error();
  EXPECT_EQ(ledger_files(), 1u) << "demo.flaky's .attempts file stays; its step is undone";
}

}  // namespace
}  // namespace proctor::testing
