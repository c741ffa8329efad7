// proctor-bench (j), the runtime's floor: what an actor costs that does nothing but what
// every resumed procedure must do at the least, measured in the same actor system right
// after the timers fired. Like the timers' trees, `trees` parents each spawn their share of
// n monitored actors (at most 64 live at once each) and send each one message; each answers
// its parent and exits, and the parent sees it go down: a spawn and three messages per
// actor, no journal, no step, no scheduler. A resumed procedure does all of that and more
// (proctor-bench reports both), so this rate bounds the resumed rate from above here.
#include <atomic>
#include <future>

#include "bench.hpp"

namespace proctor::bench {

namespace {

using floor_go_atom = caf::atom_constant<caf::atom("floorgo")>;
using floor_done_atom = caf::atom_constant<caf::atom("floordone")>;

caf::behavior floor_leaf(caf::event_based_actor* self, caf::actor parent) {
  return {[self, parent](floor_go_atom) {
    self->send(parent, floor_done_atom::value);
    self->quit();
  }};
}

struct floor_parent_state {
  size_t to_spawn = 0;  ///< children not spawned yet
  size_t live = 0;      ///< spawned and not down yet
};

/// At most this many children of a parent live at once: the firing brings procedures back
/// as their deadlines come, not all at once, and a million live actors would measure the
/// allocator's page faults rather than what an actor costs.
constexpr size_t floor_in_flight = 64;

void floor_spawn_one(caf::stateful_actor<floor_parent_state>* self) {
  --self->state.to_spawn;
  ++self->state.live;
  auto c = self->spawn<caf::monitored>(floor_leaf, caf::actor_cast<caf::actor>(self));
  self->send(c, floor_go_atom::value);
}

caf::behavior floor_parent(caf::stateful_actor<floor_parent_state>* self, size_t n,
                           std::shared_ptr<std::atomic<size_t>> parents_left,
                           std::shared_ptr<std::promise<void>> all_down) {
  self->state.to_spawn = n;
  self->set_down_handler([self, parents_left, all_down](caf::down_msg&) {
    auto& st = self->state;
    --st.live;
    if (st.to_spawn > 0)
      return floor_spawn_one(self);
    if (st.live > 0)
      return;
    if (parents_left->fetch_sub(1) == 1)
      all_down->set_value();
    self->quit();
  });
  return {
    [self](floor_go_atom) {
      while (self->state.to_spawn > 0 && self->state.live < floor_in_flight)
        floor_spawn_one(self);
    },
    [](floor_done_atom) {},
  };
}

}  // namespace

double actor_floor_per_s(caf::actor_system& sys, size_t n, size_t trees) {
  if (n == 0)
    return 0;
  trees = std::max<size_t>(1, std::min(trees, n));
  auto parents_left = std::make_shared<std::atomic<size_t>>(trees);
  auto all_down = std::make_shared<std::promise<void>>();
  auto done = all_down->get_future();
  std::vector<caf::actor> parents;
  for (size_t t = 0; t < trees; ++t) {
    auto share = n / trees + (t < n % trees ? 1 : 0);
    parents.push_back(sys.spawn(floor_parent, share, parents_left, all_down));
  }
  auto t0 = clk::now();
  for (auto& p : parents)
    caf::anon_send(p, floor_go_atom::value);
  if (done.wait_for(std::chrono::minutes{5}) != std::future_status::ready)
    throw std::runtime_error("the actor floor's actors were not all down after 5 minutes");
  return static_cast<double>(n) / std::max(1e-6, secs(clk::now() - t0));
}

}  // namespace proctor::bench
