// The placeholder of a child on another node, alone, against a scripted parent and executor
// (remote_child.cpp): its hand-over when it gives up its actor, one message at a time, with
// the interleavings the engine tests reach only by chance.
#include <atomic>
#include <memory>
#include <thread>

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "actors/base/errors.hpp"
#include "actors/node/node.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/procedure/remote.hpp"
#include "persistence/tree_image.hpp"

namespace proctor {
namespace {

using answer_atom = caf::atom_constant<caf::atom("answer")>;

/// The placeholder's request to the executor, held until the test answers it.
struct held_request {
  caf::response_promise rp;
  std::atomic<bool> asked{false};

  /// True once the request came (within 5 s).
  bool came() const {
    for (int i = 0; i < 1000 && !asked.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
    return asked.load();
  }
};

/// Stands for the executor: answers the placeholder's remote_passivate_via only when told
/// (answer_atom, bool); takes its route and its statuses, and answers nothing else (CAF
/// sends what a handler returns back to the sender, an error too, which would end the
/// placeholder).
caf::behavior held_executor(caf::event_based_actor* self, std::shared_ptr<held_request> held) {
  self->set_default_handler(caf::skip);
  return {
    [](remote_route_atom, uint64_t, const caf::actor&) {},
    [](update_atom, const proc_update&) {},
    [self, held](remote_passivate_via_atom, uint64_t, const caf::actor&) {
      held->rp = self->make_response_promise();
      held->asked = true;
      return held->rp;
    },
    [held](answer_atom, bool switched) { held->rp.deliver(switched); },
  };
}

class placeholder_test : public ::testing::Test {
protected:
  void SetUp() override {
    tune_actor_system(cfg_);
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    parent_ = std::make_unique<caf::scoped_actor>(*sys_);
    executor_ = sys_->spawn(held_executor, held_);
    auto env = std::make_shared<node_env>();
    env->executor = executor_;
    env->timeout = executor_;  // (no deadline is armed while the node is up)
    env->passivate_after = std::chrono::milliseconds{20};
    peer_status b;
    b.name = "b";
    b.up = true;
    env->cluster->set(b);
    tree_image t;
    t.root_id = 1;
    t.procs[1].id = 1;
    t.procs[1].children = {2};
    auto& c = t.procs[2];
    c.id = 2;
    c.parent_id = 1;
    c.type = "demo.ledger";
    c.node = "b";
    proc_start s;
    s.env = env;
    s.image = std::make_shared<const tree_image>(std::move(t));
    s.id = 2;
    s.parent = caf::actor_cast<caf::actor>(*parent_);
    // Its root only gets hints here. (Not the scoped parent: a blocking actor answers a
    // message it does not expect with an error, which would end the placeholder.)
    root_ = sys_->spawn([]() -> caf::behavior { return {[](passivate_hint_atom) {}}; });
    s.root = root_;
    // Spawned by a helper (the spawner only monitors it): the test stands for its parent.
    auto me = s.parent;
    sys_->spawn(
      [s, me](caf::event_based_actor* self) { self->send(me, spawn_remote_child(self, s)); });
    (*parent_)->receive([this](caf::actor& h) { placeholder_ = h; },
                        caf::after(std::chrono::seconds{10}) >> [] { FAIL() << "no spawn"; });
  }

  void TearDown() override {
    caf::anon_send_exit(placeholder_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(executor_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(root_, caf::exit_reason::user_shutdown);
    parent_.reset();
    sys_.reset();
  }

  /// The next message, which `f` must take; fails after 10 s.
  template <class F>
  void expect(F f) {
    (*parent_)->receive(
      f,
      caf::after(std::chrono::seconds{10}) >> [] { FAIL() << "the placeholder did not answer"; });
  }

  static std::string success_end() {
    pb::RemoteEnd e;
    e.set_proc_id(2);
    e.set_state(pb::SUCCESS);
    e.set_result_json("{}");
    return e.SerializeAsString();
  }

  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<caf::scoped_actor> parent_;
  std::shared_ptr<held_request> held_ = std::make_shared<held_request>();
  caf::actor executor_;
  caf::actor root_;
  caf::actor placeholder_;
};

// The child's end reaches the placeholder after its parent said yes, before the executor
// answered: it holds the end, so it must not answer a passivation query as only waiting (its
// tree's actors, the end with them, would go); refused by the executor, it takes the offer
// back and reports the end.
TEST_F(placeholder_test, an_end_held_while_it_offers_keeps_its_tree_awake) {
  (*parent_)->send(placeholder_, passivation_refused_atom::value);
  expect([](passivate_offer_atom, uint64_t id, std::shared_ptr<const tree_image>& image) {
    EXPECT_EQ(id, 2u);
    ASSERT_NE(image->find(2), nullptr);
    EXPECT_EQ(image->find(2)->node, "b");
  });
  (*parent_)->send(placeholder_, passivate_reply_atom::value, true);
  ASSERT_TRUE(held_->came()) << "the placeholder did not ask the executor to route its child's "
                                "messages to its parent";
  caf::anon_send(placeholder_, remote_end_atom::value, success_end(), int64_t{1'764'052'812'000});
  (*parent_)->send(placeholder_, passivate_query_atom::value, uint64_t{7});
  expect([](passivate_answer_atom, uint64_t tag, uint64_t id, passivation_answer& a) {
    EXPECT_EQ(tag, 7u);
    EXPECT_EQ(id, 2u);
    EXPECT_FALSE(a.idle) << "it answered 'only waits' with the child's end in hand";
  });
  caf::anon_send(executor_, answer_atom::value, false);
  expect([](passivate_undo_atom, uint64_t id) { EXPECT_EQ(id, 2u); });
  expect([](subtree_done_atom, subtree_done& d) {
    EXPECT_EQ(d.result.id, 2u);
    EXPECT_EQ(d.result.state, proc_state::success);
  });
}

// Told yes and switched by the executor, with nothing held, it gives up its actor
// (errc::passivated, which its parent takes as "passivated now").
TEST_F(placeholder_test, switched_with_nothing_held_it_gives_up_its_actor) {
  (*parent_)->monitor(placeholder_);
  (*parent_)->send(placeholder_, passivation_refused_atom::value);
  expect([](passivate_offer_atom, uint64_t, std::shared_ptr<const tree_image>&) {});
  (*parent_)->send(placeholder_, passivate_reply_atom::value, true);
  ASSERT_TRUE(held_->came());
  caf::anon_send(executor_, answer_atom::value, true);
  expect([](caf::down_msg& m) { EXPECT_TRUE(is(m.reason, errc::passivated)); });
}

}  // namespace
}  // namespace proctor
