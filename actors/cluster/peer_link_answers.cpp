// What a heartbeat's answer says about the peer (on_pong): up with its status, a replica
// that names its leader, a refusal, or an incarnation this node must not take (docs/cluster.md,
// "Incarnations"): the first one heard is journaled before it is taken.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/base/log_rate.hpp"
#include "actors/cluster/internal/peer_link_state.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/wire/json/cluster_json.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/journal.hpp"
#include "persistence/keys.hpp"

namespace proctor::peer_link_detail {

namespace {

/// The peer answered as incarnation `heard`, which is refused (`why`): down, the refusal
/// counted and logged at a falling rate (and whenever another incarnation is refused).
bool refuse_incarnation(link_actor* self, uint64_t heard, const std::string& why) {
  auto& st = self->state;
  auto n = ++st.status.refusals;
  if (log_nth(n) || st.refused_incarnation != heard)
    spdlog::error("link to node {}: {} ({} answer(s) so far; logged at a falling rate)",
                  st.cfg.peer_name, why, n);
  st.refused_incarnation = heard;
  go_down(self, why, false);
  notify(self);
  return false;
}

/// Whether the peer that answered is the incarnation this node knows. Until the node
/// recovered (it does not know yet), no; the first incarnation heard is journaled before it
/// is taken (the next heartbeat then finds it known); another one than the journal's makes
/// the peer down: it came back with an empty journal, and what the old one held is lost.
/// A peer of a version without incarnations (0) is taken as it is.
bool incarnation_taken(link_actor* self, uint64_t heard) {
  auto& st = self->state;
  auto& s = st.status;
  if (heard == 0)
    return true;
  if (!st.expect_known)
    return false;  // asked again at the next heartbeat
  if (st.forgotten.count(heard) > 0)
    return refuse_incarnation(
      self, heard,
      "node " + st.cfg.peer_name + " at " + s.address + " came back as incarnation "
        + incarnation_hex(heard)
        + ", which an operator forgot (proctor node forget): what it held was declared lost and "
          "undone elsewhere, so it is refused for good; to bring the name back, start it with "
          "an empty data directory");
  if (s.incarnation == heard)
    return true;
  if (s.incarnation == 0) {
    if (!st.recording && st.journal) {
      st.recording = true;
      pb::JournalRecord rec;
      auto* p = rec.mutable_peer_incarnation();
      p->set_peer(st.cfg.peer_name);
      p->set_incarnation(heard);
      p->set_first_seen_ms(wall_ms());
      journal_batch b;
      b.entries.push_back(make_entry(journal_keys::meta_root, rec));
      self->request(st.journal, caf::infinite, append_atom::value, std::move(b))
        .then(
          [self, heard](uint64_t) {
            auto& st = self->state;
            st.recording = false;
            st.status.incarnation = heard;
            st.status.journal_lsn = 0;  // the other journal's LSN is not this one's
            spdlog::info("node {}: incarnation {} recorded (its first answer)", st.cfg.peer_name,
                         incarnation_hex(heard));
          },
          [self](caf::error& e) {
            self->state.recording = false;
            spdlog::warn("node {}: recording its incarnation failed ({}); tried again",
                         self->state.cfg.peer_name, caf::to_string(e));
          });
    }
    return false;
  }
  return refuse_incarnation(
    self, heard,
    "node " + st.cfg.peer_name + " at " + s.address
      + " came back with another journal (incarnation " + incarnation_hex(heard)
      + "; this node knew " + incarnation_hex(s.incarnation)
      + "): what the node that left held is lost, and the new one's answers are not taken for "
        "its; once it is lost for good, declare it so on every node that knew it: proctor node "
        "forget "
      + st.cfg.peer_name + " --confirm-lost");
}

}  // namespace

void on_pong(link_actor* self, const pb::Response& r) {
  auto& st = self->state;
  auto rtt =
    std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - st.ping_sent);
  st.ping_tag = 0;
  st.answered = true;
  if (r.code() == pb::Response::NOT_LEADER) {
    // A replica of the node that does not lead it (docs/replication.md): the leader it
    // names is tried next, wherever it is (a replica replaced at a new address leads there),
    // else the next address.
    if (!r.leader().empty())
      if (auto i = learn_address(self, r.leader())) {
        const auto n = st.cfg.addresses.size();
        st.address_index = (*i + n - 1) % n;  // go_down moves on by one
      }
    auto n = ++st.not_leader_answers;
    if (log_nth(n))
      spdlog::info("link to node {}: {} ({} such answer(s); logged at a falling rate)",
                   st.cfg.peer_name, r.error(), n);
    return go_down(self, r.error(), false);
  }
  if (r.code() == pb::Response::OK && r.pong().name() == st.cfg.peer_name) {
    // Ids are the name's, whichever incarnation reports them: an incarnation refused here
    // (a node restarted empty, not forgotten yet) hands out ids too, and the next one must
    // begin above them (docs/cluster.md, "Procedure ids"). Its journal's LSN is not taken:
    // it is another journal's.
    auto& s = st.status;
    s.next_id = r.pong().next_id();
    s.heard_next_id = r.pong().your_next_id();
    s.heard_incarnation = r.pong().your_incarnation();
    s.heard_journal_lsn = r.pong().your_journal_lsn();
    s.heard_forgotten_incarnation = r.pong().your_forgotten_incarnation();
    s.heard_forgotten_at_ms = r.pong().your_forgotten_at_ms();
    s.heard = true;
    s.members.assign(r.pong().members().begin(), r.pong().members().end());
    s.forgotten.clear();
    for (const auto& f : r.pong().forgotten())
      s.forgotten.push_back({f.name(), f.incarnation(), f.at_ms()});
    if (!incarnation_taken(self, r.pong().incarnation()))
      return;
  }
  if (r.code() != pb::Response::OK || r.pong().name() != st.cfg.peer_name) {
    auto why = r.code() != pb::Response::OK
                 ? "it refuses this node: " + r.error()
                 : st.status.address + " answers as node '" + r.pong().name() + "', not '"
                     + st.cfg.peer_name + "'";
    // Every heartbeat gets the same answer until someone fixes --peers: logged at a falling
    // rate, counted in proctor_peer_refusals_total.
    auto n = ++st.status.refusals;
    if (log_nth(n))
      spdlog::error("link to node {}: {} ({} answer(s) so far; logged at a falling rate)",
                    st.cfg.peer_name, why, n);
    go_down(self, why, false);
    notify(self);  // the count, for the metric, also when the reason stays the same
    return;
  }
  // Every answer goes to the parent, not only a change: its load (`live`) is what
  // placement on any node weighs.
  auto& s = st.status;
  s.rtt_us = rtt.count();
  s.number = static_cast<uint16_t>(r.pong().number());
  s.live = r.pong().live();
  s.started_at_ms = r.pong().started_at_ms();
  s.group = r.pong().has_group() ? r.pong().group().SerializeAsString() : std::string{};
  // Its group's members as its leader knows them: where to look when this one goes.
  for (const auto& m : r.pong().group().replicas())
    if (!m.address().empty())
      learn_address(self, m.address());
  s.journal_lsn = r.pong().journal_lsn();  // (its ids: above, whatever its incarnation)
  if (st.want_types) {
    s.types.assign(r.pong().types().begin(), r.pong().types().end());
    std::sort(s.types.begin(), s.types.end());
    s.types_known = true;
    st.want_types = false;
  }
  st.backoff = std::chrono::milliseconds{0};
  if (!s.up) {
    st.left = false;
    spdlog::info("node {} is up ({})", st.cfg.peer_name, s.address);
    s.up = true;
    s.since_ms = wall_ms();
    s.reason.clear();
  }
  notify(self);
}

}  // namespace proctor::peer_link_detail
