// Nonces when slots move (docs/cluster-group.md, "Nonces when slots move"; nonce_handoff.hpp).
// A nonce placed by a key is answered by the owner of the key's slot. When the cluster group
// changes the members, slots move; the new owner of a slot must know every nonce accepted in
// it before it accepts one, or a client that retries a submit after the change starts the
// work twice. So, at each placement epoch (the group's log index of its last member change),
// a node takes over the slots it owns now and did not hold completely before: it asks every
// other active or draining member for the nonces it knows in them (its own roots' and those
// it took over itself), journals what is new (NonceTaken records), and only then accepts
// nonces placed in them; meanwhile such submits are refused with "retry", never accepted
// twice. An answer counts only when the member is at the same epoch (so it no longer owns
// those slots and will not accept them again) and has no submit of them on its way to the
// journal. Every member must answer: one that is down holds up the slots that moved (not the
// others) until it is back or forgotten; a forgotten node's nonces are lost with it.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/base/placement.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

namespace {

constexpr auto ask_bound = std::chrono::milliseconds{5'000};
constexpr auto retry_after = std::chrono::milliseconds{250};

uint64_t epoch_of(const std::vector<cluster_peer>& members) {
  uint64_t e = 0;
  for (const auto& m : members)
    e = std::max(e, m.since_index);
  return e;
}

/// The slot a nonce of this node's roots was placed by.
uint32_t own_slot(const nonce_handoff_part& h, const std::string& nonce) {
  auto i = h.root_slots.find(nonce);
  return i != h.root_slots.end() ? i->second : placement::slot_of(nonce);
}

bool expired(executor_actor* self, const taken_nonce& t) {
  return t.ended_at_ms != 0 && t.ended_at_ms + self->state.cfg.result_ttl.count() <= wall_ms();
}

void arm_sweep(executor_actor* self) {
  auto& h = self->state.handoff;
  if (h.sweep_armed || h.taken.empty())
    return;
  h.sweep_armed = true;
  auto every = std::clamp(self->state.cfg.result_ttl / 10, std::chrono::milliseconds{1'000},
                          std::chrono::milliseconds{60'000});
  self->delayed_send(self, every, handoff_sweep_atom::value);
}

void ensure_sized(nonce_handoff_part& h) {
  if (h.complete.empty()) {
    h.complete.assign(placement::slot_count, false);
    h.pending.assign(placement::slot_count, 0);
  }
}

void became_ready(executor_actor* self) {
  auto& st = self->state;
  auto& h = st.handoff;
  for (auto s : h.pulling)
    h.complete[s] = true;
  if (!h.pulling.empty())
    spdlog::info("node {}: took over the nonces of {} slot(s) at the cluster's change {} from "
                 "{} member(s) in {} ms: it accepts nonces placed in them",
                 st.env->node_name, h.pulling.size(), h.epoch, h.others.size(),
                 std::max<int64_t>(0, wall_ms() - h.epoch_since_ms));
  h.pulling.clear();
  h.why.clear();
  h.ready_epoch = h.epoch;
  schedules_placement_changed(self);  // the schedules of the slots it took over fire here
}

void ask(executor_actor* self, const std::string& member);

void retry_later(executor_actor* self, const std::string& member, std::string why) {
  auto& h = self->state.handoff;
  h.why[member] = std::move(why);
  self->delayed_send(self, retry_after, handoff_retry_atom::value, member, h.epoch);
}

/// `member` answered the ask of `epoch`.
void answered(executor_actor* self, const std::string& member, uint64_t epoch,
              const pb::NonceHandoff& ans) {
  auto& st = self->state;
  auto& h = st.handoff;
  if (epoch != h.epoch || h.awaiting.count(member) == 0)
    return;  // an earlier epoch's
  if (ans.epoch() != h.epoch)
    return retry_later(self, member,
                       ans.epoch() < h.epoch
                         ? "it has not yet applied the cluster's change " + std::to_string(h.epoch)
                         : "it is at a later change of the cluster (" + std::to_string(ans.epoch())
                             + "), which this node has not applied yet");
  journal_batch b;
  std::vector<std::pair<std::string, taken_nonce>> adds;
  const auto now = wall_ms();
  for (const auto& e : ans.entries()) {
    if (e.nonce().empty() || e.id() == 0 || st.nonces.count(e.nonce()) != 0)
      continue;  // one of its own roots: known
    taken_nonce t{e.id(), e.slot(), e.ended_at_ms(), 0};
    auto known = h.taken.find(e.nonce());
    if (known != h.taken.end() && known->second.id == t.id
        && known->second.ended_at_ms == t.ended_at_ms)
      continue;
    if (known != h.taken.end() && known->second.lsn != 0)
      b.deletes.push_back({journal_keys::meta_root, known->second.lsn, known->second.lsn + 1, 0});
    pb::JournalRecord rec;
    auto* r = rec.mutable_nonce_taken();
    r->set_nonce(e.nonce());
    r->set_id(t.id);
    r->set_slot(t.slot);
    r->set_ended_at_ms(t.ended_at_ms);
    r->set_from(member);
    r->set_at_ms(now);
    b.entries.push_back(make_entry(journal_keys::meta_root, rec));
    adds.emplace_back(e.nonce(), t);
    spdlog::debug("node {}: takes nonce '{}' (root {}, slot {}) from node {}", st.env->node_name,
                  e.nonce(), t.id, t.slot, member);
  }
  auto done = [self, member, epoch] {
    auto& h = self->state.handoff;
    if (epoch != h.epoch || h.awaiting.erase(member) == 0)
      return;
    h.why.erase(member);
    if (h.awaiting.empty())
      became_ready(self);
  };
  if (b.entries.empty())
    return done();
  const auto n = adds.size();
  append(self, std::move(b), [self, adds = std::move(adds), n, done](uint64_t last_lsn) mutable {
    auto& h = self->state.handoff;
    // One entry each, in order: their LSNs end at the batch's last.
    uint64_t lsn = last_lsn + 1 - n;
    for (auto& [nonce, t] : adds) {
      t.lsn = lsn++;
      h.taken[nonce] = t;
    }
    arm_sweep(self);
    done();
  });
}

void ask(executor_actor* self, const std::string& member) {
  auto& st = self->state;
  auto& h = st.handoff;
  if (!st.env->transport)
    return;
  pb::Request req;
  req.set_tag(1);
  auto* n = req.mutable_nonces();
  n->set_node(st.env->node_name);
  n->set_epoch(h.epoch);
  for (auto s : h.pulling)
    n->add_slots(s);
  const auto epoch = h.epoch;
  self
    ->request(st.env->transport, ask_bound + std::chrono::seconds{1}, peer_request_atom::value,
              member, req.SerializeAsString(), static_cast<uint32_t>(ask_bound.count()))
    .then(
      [self, member, epoch](std::string& bytes) {
        if (epoch != self->state.handoff.epoch)
          return;
        pb::Response r;
        if (!r.ParseFromString(bytes))
          return retry_later(self, member, "its answer does not parse");
        if (r.code() == pb::Response::BAD_REQUEST && !r.has_nonces()) {
          // A node of an earlier release: it hands nothing over (its nonces stay its own, as
          // they were before it was upgraded).
          spdlog::warn("node {}: node {} cannot hand nonces over ({}): taken as having none",
                       self->state.env->node_name, member, r.error());
          return answered(self, member, epoch, [&] {
            pb::NonceHandoff none;
            none.set_epoch(epoch);
            return none;
          }());
        }
        if (r.code() != pb::Response::OK)
          return retry_later(self, member, r.error());
        answered(self, member, epoch, r.nonces());
      },
      [self, member, epoch](caf::error& e) {
        if (epoch == self->state.handoff.epoch)
          retry_later(self, member, "it did not answer (" + error_text(self->system(), e) + ")");
      });
}

}  // namespace

void handoff_members(executor_actor* self, const std::vector<cluster_peer>& members) {
  auto& st = self->state;
  auto& h = st.handoff;
  ensure_sized(h);
  h.others.clear();
  h.active.clear();
  h.drain_epoch = 0;
  for (const auto& m : members) {
    if (m.name == st.env->node_name) {
      if (m.state == pb::DRAINING)
        h.drain_epoch = m.since_index;
      continue;
    }
    if (m.state == pb::ACTIVE || m.state == pb::DRAINING)
      h.others.push_back(m.name);
    if (m.state == pb::ACTIVE)
      h.active.push_back(m.name);
  }
  const auto epoch = epoch_of(members);
  if (epoch <= h.epoch)
    return;  // the same table (an earlier epoch's state never comes after a later one's)
  h.epoch = epoch;
  h.epoch_since_ms = wall_ms();
  // What it held completely and still owns, it keeps: no other node accepted nonces in those
  // slots meanwhile (it would have needed this node's answer at its epoch, and this node
  // would then have given them up). The rest of what it owns it takes over.
  const auto& t = placement_now(self);
  h.pulling.clear();
  for (uint32_t s = 0; s < placement::slot_count; ++s) {
    const bool owned = t.owner(s) == st.env->node_name;
    if (!owned)
      h.complete[s] = false;
    else if (!h.complete[s])
      h.pulling.push_back(s);
  }
  h.awaiting = std::set<std::string>(h.others.begin(), h.others.end());
  h.why.clear();
  if (h.pulling.empty() || h.awaiting.empty())
    return became_ready(self);
  schedules_placement_changed(self);  // those of the slots it gave up no longer fire here
  spdlog::info("node {}: the cluster changed (change {}): it takes over the nonces of {} slot(s) "
               "from {}; nonces placed in them are refused (\"retry\") until then",
               st.env->node_name, epoch, h.pulling.size(), comma_list(h.others));
  for (const auto& m : h.others)
    ask(self, m);
}

void handoff_retry(executor_actor* self, const std::string& member, uint64_t epoch) {
  auto& h = self->state.handoff;
  if (epoch == h.epoch && h.awaiting.count(member) != 0)
    ask(self, member);
}

bool in_cluster_group(executor_actor* self) {
  return self->state.env->cluster_member && self->state.handoff.epoch != 0;
}

std::string handoff_refusal(executor_actor* self, uint32_t slot) {
  auto& st = self->state;
  const auto& h = st.handoff;
  if (h.epoch == 0) {
    // The group has not spoken since the start (its member opens once the node serves): a
    // node in none owns every slot; a node of a group waits for it, even when it knows no
    // peer yet (its table is itself alone then, and says nothing: a node restarted before it
    // kept the members' list may be one of five).
    if (!st.env->cluster_member)
      return {};
    return "node " + st.env->node_name
           + " has not heard from the cluster group since it started, and cannot know yet "
             "whether slot "
           + std::to_string(slot) + " is its own: nothing was started, retry";
  }
  if (slot < h.complete.size() && h.complete[slot])
    return {};
  std::string waits;
  for (const auto& m : h.awaiting) {
    if (!waits.empty())
      waits += "; ";
    auto w = h.why.find(m);
    waits += m + (w != h.why.end() ? " (" + w->second + ")" : "");
  }
  return "node " + st.env->node_name + " owns slot " + std::to_string(slot)
         + " since the cluster's change " + std::to_string(h.epoch)
         + " and is taking over the nonces the other nodes know in it"
         + (waits.empty() ? std::string{} : ", waiting for " + waits)
         + ": nothing was started, retry";
}

std::optional<uint64_t> nonce_taken_id(executor_actor* self, const std::string& nonce) {
  const auto& h = self->state.handoff;
  auto i = h.taken.find(nonce);
  if (i == h.taken.end() || expired(self, i->second))
    return std::nullopt;
  return i->second.id;
}

void nonce_submit_started(executor_actor* self, uint32_t slot) {
  auto& h = self->state.handoff;
  ensure_sized(h);
  ++h.pending[slot % placement::slot_count];
}

void nonce_submit_ended(executor_actor* self, uint32_t slot) {
  auto& h = self->state.handoff;
  auto& n = h.pending[slot % placement::slot_count];
  if (n > 0)
    --n;
}

void root_nonce_slot(executor_actor* self, const std::string& nonce, uint32_t slot) {
  self->state.handoff.root_slots[nonce] = slot;
}

void root_nonce_dropped(executor_actor* self, const std::string& nonce) {
  self->state.handoff.root_slots.erase(nonce);
}

void nonces_taken_recovered(executor_actor* self, std::vector<recovered_nonce>& taken) {
  auto& h = self->state.handoff;
  for (auto& r : taken) {
    auto& t = h.taken[r.rec.nonce()];
    if (r.lsn < t.lsn)
      continue;  // (a later one of the same nonce was read first)
    t = taken_nonce{r.rec.id(), r.rec.slot(), r.rec.ended_at_ms(), r.lsn};
  }
  arm_sweep(self);
}

void handle_nonce_handoff(executor_actor* self, const pb::NonceHandoffRequest& req, promise_t rp) {
  auto& st = self->state;
  auto& h = st.handoff;
  ensure_sized(h);
  pb::Response r;
  auto* a = r.mutable_nonces();
  a->set_epoch(h.epoch);
  if (req.check()) {
    a->set_taken_epoch(h.ready_epoch);
    return reply(rp, encode(r));
  }
  if (req.epoch() == h.epoch) {
    // Submits accepted in those slots before this node gave them up must be durable first.
    for (auto s : req.slots())
      if (s < placement::slot_count && h.pending[s] > 0)
        return reply(rp, error_reply(pb::Response::REFUSED,
                                     "node " + st.env->node_name + " has a submit of slot "
                                       + std::to_string(s) + " on its way to its journal"));
    std::vector<bool> asked(placement::slot_count, false);
    for (auto s : req.slots())
      if (s < placement::slot_count)
        asked[s] = true;
    for (const auto& [nonce, id] : st.nonces) {
      const auto slot = own_slot(h, nonce);
      if (!asked[slot])
        continue;
      auto* e = a->add_entries();
      e->set_nonce(nonce);
      e->set_id(id);
      e->set_slot(slot);
      if (auto p = st.procs.find(id); p != st.procs.end() && p->second.ended)
        e->set_ended_at_ms(std::max<int64_t>(p->second.ended_at_ms, 1));
    }
    for (const auto& [nonce, t] : h.taken) {
      if (t.slot >= placement::slot_count || !asked[t.slot] || expired(self, t))
        continue;
      auto* e = a->add_entries();
      e->set_nonce(nonce);
      e->set_id(t.id);
      e->set_slot(t.slot);
      e->set_ended_at_ms(t.ended_at_ms);
    }
    spdlog::debug("node {}: handed {} nonce(s) of {} slot(s) to node {} (change {})",
                  st.env->node_name, a->entries_size(), req.slots_size(), req.node(), h.epoch);
  }
  reply(rp, encode(r));
}

void handoff_check(executor_actor* self, caf::typed_response_promise<std::string> rp) {
  auto& st = self->state;
  auto& h = st.handoff;
  if (h.epoch == 0 || h.drain_epoch == 0 || h.active.empty() || !st.env->transport) {
    rp.deliver(std::string{});
    return;
  }
  struct gather {
    size_t left = 0;
    std::vector<std::string> missing;
    caf::typed_response_promise<std::string> rp;
  };
  auto g = std::make_shared<gather>();
  g->left = h.active.size();
  g->rp = rp;
  const auto drain_epoch = h.drain_epoch;
  auto one = [self, g](std::string why) {
    if (!why.empty())
      g->missing.push_back(std::move(why));
    if (--g->left > 0)
      return;
    if (g->missing.empty()) {
      g->rp.deliver(std::string{});
      return;
    }
    std::string text;
    for (const auto& m : g->missing)
      text += (text.empty() ? "" : "; ") + m;
    g->rp.deliver("node " + self->state.env->node_name
                  + "'s nonces are not yet held by every "
                    "active member ("
                  + text + ")");
  };
  pb::Request req;
  req.set_tag(1);
  req.mutable_nonces()->set_node(st.env->node_name);
  req.mutable_nonces()->set_check(true);
  const auto bytes = req.SerializeAsString();
  for (const auto& m : h.active)
    self
      ->request(st.env->transport, ask_bound + std::chrono::seconds{1}, peer_request_atom::value, m,
                bytes, static_cast<uint32_t>(ask_bound.count()))
      .then(
        [one, m, drain_epoch](std::string& answer) {
          pb::Response r;
          if (!r.ParseFromString(answer) || r.code() != pb::Response::OK)
            return one("node " + m + " did not say: " + r.error());
          if (r.nonces().taken_epoch() < drain_epoch)
            return one("node " + m + " has not taken them over yet");
          one({});
        },
        [self, one, m](caf::error& e) {
          one("node " + m + " did not answer (" + error_text(self->system(), e) + ")");
        });
}

void sweep_taken_nonces(executor_actor* self) {
  auto& h = self->state.handoff;
  h.sweep_armed = false;
  journal_batch b;
  for (auto i = h.taken.begin(); i != h.taken.end();) {
    if (i->second.lsn == 0 || !expired(self, i->second)) {
      ++i;
      continue;
    }
    b.deletes.push_back({journal_keys::meta_root, i->second.lsn, i->second.lsn + 1, 0});
    i = h.taken.erase(i);
  }
  if (!b.deletes.empty())
    append(self, std::move(b));  // (lost in a crash: read back, and swept again)
  arm_sweep(self);
}

}  // namespace proctor::exec_detail
