// `proctor replicas add|remove` on the replica that leads: the checks that refuse a change
// before Raft sees it, the membership change itself (bounded by the store), and its answer.
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/node/replica_node.hpp"

namespace proctor {

pb::Response replica_node::change(const pb::ReplicasRequest& rq) {
  pb::Response resp;
  auto refuse = [&](pb::Response::Code code, std::string error) {
    resp.set_code(code);
    resp.set_error(std::move(error));
    return resp;
  };
  const auto& node = setup_.node_name;
  if (!rq.add().empty() && !rq.remove().empty())
    return refuse(pb::Response::BAD_REQUEST, "replicas: add or remove, not both at once");
  const auto g = group();
  membership_change c;
  std::string who;
  uint64_t removed_id = 0;
  if (!rq.add().empty()) {
    replica_member m;
    std::string err;
    if (!parse_replica(rq.add(), &m, &err))
      return refuse(pb::Response::BAD_REQUEST, "replicas add: " + err);
    for (const auto& o : g) {
      if (o.name == m.name) {
        if (replica_spec(o) != replica_spec(m))
          return refuse(pb::Response::BAD_REQUEST,
                        "replica " + m.name + " is already in node " + node + "'s group as "
                          + replica_spec(o) + ": remove it first to give it other addresses");
      } else if (o.raft_address == m.raft_address || client_address(o) == client_address(m)
                 || o.raft_address == client_address(m) || client_address(o) == m.raft_address) {
        return refuse(pb::Response::BAD_REQUEST, "replicas add: " + m.name
                                                   + "'s addresses clash with replica " + o.name
                                                   + "'s (" + replica_spec(o) + ")");
      }
    }
    // Its process must be there, started with --join: the catch-up would otherwise wait its
    // whole timeout for a replica that is not coming (issue 47.6). One started a moment ago
    // is given some seconds to listen.
    std::string why;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
    while (!ask_replicas(m, setup_.tls, &why)) {
      if (std::chrono::steady_clock::now() >= until)
        return refuse(pb::Response::REFUSED,
                      "replica " + m.name + " does not answer at " + client_address(m) + " (" + why
                        + "): start it first (proctord --replica " + m.name
                        + " --join on an empty data directory), then add it; nothing was "
                          "changed");
      std::this_thread::sleep_for(std::chrono::milliseconds{200});
    }
    c.what = membership_change::kind::add;
    c.member = raft_member{m.raft_id, m.raft_address, replica_spec(m)};
    c.catch_up_timeout =
      std::chrono::milliseconds{rq.timeout_ms() != 0 ? rq.timeout_ms() : 120'000u};
    who = "replica " + m.name + " (" + replica_spec(m) + ")";
  } else {
    const auto* m = find_replica(g, std::string_view{rq.remove()});
    if (m == nullptr) {
      std::string names;
      for (const auto& o : g)
        names += (names.empty() ? "" : ", ") + o.name;
      return refuse(pb::Response::NOT_FOUND,
                    "no replica " + rq.remove() + " in node " + node + "'s group (" + names + ")");
    }
    if (m->raft_id == self_->raft_id)
      return refuse(pb::Response::REFUSED,
                    "replica " + m->name + " leads node " + node
                      + "'s group and cannot remove itself: stop its process (another "
                        "replica is elected), then run `proctor replicas remove "
                      + m->name + "` again");
    c.what = membership_change::kind::remove;
    c.member.id = m->raft_id;
    removed_id = m->raft_id;
    who = "replica " + m->name;
  }
  const bool adding = c.what == membership_change::kind::add;
  spdlog::info("replica {} of node {}: {} {}", setup_.replica, node, adding ? "adding" : "removing",
               who);
  // Bounded by the store: the catch-up timeout, the loss of leadership, or its close.
  auto outcome = store_->change_membership(std::move(c)).get();
  *resp.mutable_replicas() = replicas();
  const auto& st = outcome.status;
  if (st.ok()) {
    resp.set_text("node " + node + ": " + who + (adding ? " added: " : ": ") + outcome.text + "\n");
    if (!adding) {
      // Its data directory is forgotten with it: a replacement under its name, started with
      // --join on a new directory, is recorded anew (replica_identity.hpp).
      if (auto f = store_->write({forget_dir_op(removed_id)}); !f.ok())
        resp.set_text(resp.text() + "(its data directory's id is still recorded: " + f.ToString()
                      + "; a replacement under its name is refused until "
                        "`replicas remove` is run again)\n");
    }
    return resp;
  }
  auto text = "node " + node + ": " + who + ": " + outcome.text;
  if (st.IsBusy() && !store_->is_leader()) {
    auto why = why_not();
    resp.set_leader(why.leader);
    return refuse(pb::Response::NOT_LEADER, why.error);
  }
  return refuse(st.IsTimedOut()                    ? pb::Response::TIMEOUT
                : st.IsNotFound()                  ? pb::Response::NOT_FOUND
                : st.IsInvalidArgument()           ? pb::Response::BAD_REQUEST
                : st.IsBusy() || st.IsIncomplete() ? pb::Response::REFUSED
                                                   : pb::Response::INTERNAL,
                text);
}

}  // namespace proctor
