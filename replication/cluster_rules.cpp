// The cluster group's rules: apply_cluster_command and the rule of each command kind, the
// feature levels, and a command's encoding as a Raft entry (cluster_state.hpp). Pure
// functions of the state and the command; the state machine that applies them is
// cluster_state.cpp.
#include <algorithm>
#include <utility>

#include "replication/cluster_state.hpp"

namespace proctor {

namespace {

constexpr uint32_t max_number = 4095;

std::string quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

cluster_outcome refused(std::string text) {
  return {false, std::move(text)};
}
cluster_outcome done(std::string text) {
  return {true, std::move(text)};
}

pb::ClusterMember* find_mutable(pb::ClusterState* state, std::string_view name) {
  for (auto& m : *state->mutable_members())
    if (m.name() == name)
      return &m;
  return nullptr;
}

std::string who(const pb::ClusterMember& m) {
  return quoted(m.name()) + " (incarnation " + std::to_string(m.incarnation()) + ")";
}

/// The number for a new name: the one it asks for (a node that ran before, whose ids carry
/// it) if no other name holds it, else the name's hash (the same as node_identity.hpp's
/// node_number_of, so that a name usually keeps its usual number), probing upwards to the
/// first one no name ever held. 0 when the 4095 numbers are all taken.
uint32_t choose_number(const pb::ClusterState& state, const std::string& name, uint32_t asked,
                       std::string* why) {
  auto held_by = [&](uint32_t n) -> const pb::ClusterMember* {
    for (const auto& m : state.members())
      if (m.number() == n)
        return &m;
    return nullptr;
  };
  if (asked != 0) {
    if (const auto* m = held_by(asked)) {
      *why = "number " + std::to_string(asked) + " is " + quoted(m->name())
             + "'s: two names cannot share the number their procedure ids carry";
      return 0;
    }
    return asked;
  }
  uint32_t h = 2166136261u;
  for (unsigned char c : name) {
    h ^= c;
    h *= 16777619u;
  }
  uint32_t n = h % max_number + 1;
  for (uint32_t tries = 0; tries < max_number; ++tries, n = n % max_number + 1)
    if (held_by(n) == nullptr)
      return n;
  *why = "the cluster has given all 4095 node numbers away";
  return 0;
}

void set_state(pb::ClusterMember* m, pb::MemberState s, uint64_t index, int64_t ms) {
  m->set_state(s);
  m->set_since_index(index);
  m->set_since_ms(ms);
}

/// Why a node of `name` whose release knows `level` may not take part ("" when it may).
std::string below_cluster_level(const pb::ClusterState& st, std::string_view name, uint32_t level) {
  const auto cluster = cluster_feature_level(st);
  if (std::max(1u, level) >= cluster)
    return "";
  return quoted(name) + " runs a release of feature level " + std::to_string(std::max(1u, level))
         + ", below the cluster's " + std::to_string(cluster)
         + " (its members were all upgraded past it): start it with a release of level "
         + std::to_string(cluster) + " or above";
}

/// Raises the cluster's level to the lowest its members taking part know, if that is higher.
void raise_cluster_level(pb::ClusterState* st) {
  uint32_t lowest = UINT32_MAX;
  for (const auto& m : st->members())
    if (member_takes_part(m))
      lowest = std::min(lowest, std::max(1u, m.feature_level()));
  if (lowest != UINT32_MAX && lowest > cluster_feature_level(*st))
    st->set_feature_level(lowest);
}

cluster_outcome found(pb::ClusterState* st, const pb::FoundCluster& f, uint64_t index, int64_t ms) {
  const auto& fm = f.founder();
  if (!st->cluster_id().empty()) {
    if (st->cluster_id() == f.cluster_id() && st->members_size() > 0
        && st->members(0).name() == fm.name() && st->members(0).incarnation() == fm.incarnation())
      return done("the cluster " + st->cluster_id() + " was founded already, by this node");
    return refused("the cluster " + st->cluster_id() + " is founded already: a second founding "
                   + "would make two clusters (join it with --seeds instead)");
  }
  if (f.cluster_id().empty() || f.slot_count() == 0)
    return refused("a founding needs a cluster id and a slot count");
  if (fm.name().empty() || fm.incarnation() == 0)
    return refused("a founding needs its founder's name and incarnation");
  std::string why;
  auto number = choose_number(*st, fm.name(), fm.number(), &why);
  if (number == 0)
    return refused(why);
  st->set_cluster_id(f.cluster_id());
  st->set_slot_count(f.slot_count());
  st->set_feature_level(std::max(1u, fm.feature_level()));
  auto* m = st->add_members();
  *m = fm;
  m->set_number(number);
  set_state(m, pb::ACTIVE, index, ms);
  return done("founded the cluster " + f.cluster_id() + " with " + who(*m) + " as number "
              + std::to_string(number) + ", " + std::to_string(f.slot_count()) + " slots");
}

cluster_outcome join(pb::ClusterState* st, const pb::ClusterMember& jm, uint64_t index,
                     int64_t ms) {
  if (jm.name().empty() || jm.incarnation() == 0)
    return refused("a join needs the node's name and incarnation");
  if (jm.number() > max_number)
    return refused("node number " + std::to_string(jm.number()) + " is above "
                   + std::to_string(max_number));
  if (auto why = below_cluster_level(*st, jm.name(), jm.feature_level()); !why.empty())
    return refused(why);
  auto* e = find_mutable(st, jm.name());
  if (e == nullptr) {
    std::string why;
    auto number = choose_number(*st, jm.name(), jm.number(), &why);
    if (number == 0)
      return refused(why);
    auto* m = st->add_members();
    *m = jm;
    m->set_number(number);
    set_state(m, pb::JOINING, index, ms);
    std::sort(st->mutable_members()->begin(), st->mutable_members()->end(),
              [](const auto& a, const auto& b) { return a.name() < b.name(); });
    return done(who(jm) + " joins as number " + std::to_string(number));
  }
  if (e->incarnation() == jm.incarnation()) {
    if (e->state() == pb::LEFT)
      return refused(who(*e) + " left the cluster: to join again, start it with an empty "
                     + "data directory (a new incarnation)");
    if (e->state() == pb::FORGOTTEN)
      return refused(who(*e) + " was forgotten: its trees were given up; to join again, "
                     + "start it with an empty data directory (a new incarnation)");
    bool moved = e->client_address() != jm.client_address()
                 || e->peer_address() != jm.peer_address()
                 || e->group_address() != jm.group_address();
    e->set_client_address(jm.client_address());
    e->set_peer_address(jm.peer_address());
    e->set_group_address(jm.group_address());
    e->set_feature_level(jm.feature_level());
    return done(who(*e) + " is " + member_state_name(e->state()) + " already"
                + (moved ? "; its addresses are now " + jm.client_address() + " (clients) and "
                             + jm.peer_address() + " (peers)"
                         : std::string{}));
  }
  if (member_takes_part(*e))
    return refused(quoted(e->name()) + " is a member as incarnation "
                   + std::to_string(e->incarnation()) + " (" + member_state_name(e->state())
                   + "), and this node is incarnation " + std::to_string(jm.incarnation())
                   + ": a node of that name started with another journal. If the old one is "
                   + "lost for good, forget it first (proctor node forget " + e->name()
                   + " --confirm-lost)");
  if (jm.number() != 0 && jm.number() != e->number())
    return refused(quoted(e->name()) + " had number " + std::to_string(e->number())
                   + "; a new incarnation keeps it, not " + std::to_string(jm.number()));
  const uint64_t floor = std::max(e->id_floor(), jm.id_floor());
  const auto number = e->number();
  *e = jm;
  e->set_number(number);
  e->set_id_floor(floor);
  set_state(e, pb::JOINING, index, ms);
  return done(who(*e) + " joins as a new incarnation of number " + std::to_string(number)
              + ", its ids from " + std::to_string(floor));
}

cluster_outcome activate(pb::ClusterState* st, const pb::ActivateMember& a, uint64_t index,
                         int64_t ms) {
  auto* e = find_mutable(st, a.name());
  if (e == nullptr || e->incarnation() != a.incarnation())
    return refused(quoted(a.name()) + " incarnation " + std::to_string(a.incarnation())
                   + " is not a member");
  switch (e->state()) {
    case pb::ACTIVE:
      return done(who(*e) + " is active already");
    case pb::JOINING:
    case pb::DRAINING: {
      const bool undrain = e->state() == pb::DRAINING;
      set_state(e, pb::ACTIVE, index, ms);
      return done(who(*e) + (undrain ? " is active again (its drain is cancelled)" : " is active"));
    }
    default:
      return refused(who(*e) + " is " + member_state_name(e->state()) + ": it cannot be active");
  }
}

cluster_outcome drain(pb::ClusterState* st, const pb::DrainMember& d, uint64_t index, int64_t ms) {
  auto* e = find_mutable(st, d.name());
  if (e == nullptr)
    return refused("no member named " + quoted(d.name()));
  if (e->state() == pb::DRAINING)
    return done(who(*e) + " is draining already");
  if (e->state() != pb::ACTIVE)
    return refused(who(*e) + " is " + member_state_name(e->state())
                   + ": only an active member can be drained");
  if (active_members(*st).size() == 1)
    return refused(who(*e) + " is the only active member: no other node could take its new "
                   + "work (start another node first)");
  set_state(e, pb::DRAINING, index, ms);
  return done(who(*e) + " is draining: no new work is placed on it");
}

cluster_outcome remove(pb::ClusterState* st, const pb::RemoveMember& r, uint64_t index,
                       int64_t ms) {
  auto* e = find_mutable(st, r.name());
  if (e == nullptr || e->incarnation() != r.incarnation())
    return refused(quoted(r.name()) + " incarnation " + std::to_string(r.incarnation())
                   + " is not a member");
  if (e->state() == pb::LEFT)
    return done(who(*e) + " has left already");
  if (e->state() != pb::DRAINING)
    return refused(who(*e) + " is " + member_state_name(e->state())
                   + ": drain it first (proctor node drain " + e->name() + ")");
  set_state(e, pb::LEFT, index, ms);
  return done(who(*e) + " has left the cluster");
}

cluster_outcome forget(pb::ClusterState* st, const pb::ForgetMember& f, uint64_t index,
                       int64_t ms) {
  auto* e = find_mutable(st, f.name());
  if (e == nullptr)
    return refused("no member named " + quoted(f.name()));
  if (f.incarnation() != 0 && e->incarnation() != f.incarnation())
    return refused(quoted(f.name()) + " is incarnation " + std::to_string(e->incarnation())
                   + ", not " + std::to_string(f.incarnation()));
  if (e->state() == pb::FORGOTTEN)
    return done(who(*e) + " was forgotten already");
  if (e->state() == pb::LEFT)
    return refused(who(*e) + " left the cluster cleanly: there is nothing to forget");
  set_state(e, pb::FORGOTTEN, index, ms);
  return done(who(*e) + " is forgotten: what waited on it fails");
}

cluster_outcome raise_floor(pb::ClusterState* st, const pb::RaiseIdFloor& r) {
  auto* e = find_mutable(st, r.name());
  if (e == nullptr || e->incarnation() != r.incarnation())
    return refused(quoted(r.name()) + " incarnation " + std::to_string(r.incarnation())
                   + " is not a member: its report is not taken");
  if (e->state() == pb::FORGOTTEN)
    return refused(who(*e) + " was forgotten: its report is not taken");
  if (r.feature_level() != 0) {
    if (auto why = below_cluster_level(*st, e->name(), r.feature_level()); !why.empty())
      return refused(why);
    e->set_feature_level(r.feature_level());
  }
  e->set_id_floor(std::max(e->id_floor(), r.id_floor()));
  e->set_journal_lsn(std::max(e->journal_lsn(), r.journal_lsn()));
  return done(who(*e) + ": ids from " + std::to_string(e->id_floor()) + ", journal at "
              + std::to_string(e->journal_lsn()));
}

cluster_outcome set_limit(pb::ClusterState* st, const pb::ClusterLimit& l) {
  if (l.type().empty())
    return refused("a limit needs a procedure type");
  auto* limits = st->mutable_limits();
  auto it = std::find_if(limits->begin(), limits->end(),
                         [&](const auto& x) { return x.type() == l.type(); });
  if (l.cleared()) {
    if (it == limits->end())
      return done("no limit on " + quoted(l.type()) + " was set");
    limits->erase(it);
    return done("the limit on " + quoted(l.type()) + " is removed");
  }
  if (it != limits->end())
    *it = l;
  else {
    *limits->Add() = l;
    std::sort(limits->begin(), limits->end(),
              [](const auto& a, const auto& b) { return a.type() < b.type(); });
  }
  return done(quoted(l.type()) + ": at most " + std::to_string(l.max_running()) + " running and "
              + std::to_string(l.rate()) + " started per " + std::to_string(l.per_ms())
              + " ms on each node (0: no limit)");
}

pb::Schedule* find_schedule(pb::ClusterState* st, const std::string& name) {
  for (auto& x : *st->mutable_schedules())
    if (x.name() == name)
      return &x;
  return nullptr;
}

cluster_outcome set_schedule(pb::ClusterState* st, const pb::Schedule& s) {
  if (s.name().empty())
    return refused("a schedule needs a name");
  auto* x = find_schedule(st, s.name());
  if (s.deleted()) {
    auto* all = st->mutable_schedules();
    auto it =
      std::find_if(all->begin(), all->end(), [&](const auto& y) { return y.name() == s.name(); });
    if (it == all->end())
      return refused("no schedule " + quoted(s.name()));
    all->erase(it);
    return done("schedule " + quoted(s.name()) + " is deleted");
  }
  if (s.created_at_ms() == 0 || s.cron().empty() || s.type().empty())
    return refused("schedule " + quoted(s.name()) + " needs a cron, a type and its creation time");
  // Only what every node needs: its definition and how far it was decided.
  pb::Schedule def = s;
  def.clear_runs();
  def.clear_fired();
  def.clear_triggered();
  def.clear_skipped();
  def.clear_missed();
  def.clear_buffered_ms();
  def.clear_from_cluster();
  if (x == nullptr) {
    *st->add_schedules() = def;
    std::sort(st->mutable_schedules()->begin(), st->mutable_schedules()->end(),
              [](const auto& a, const auto& b) { return a.name() < b.name(); });
    return done("schedule " + quoted(s.name()) + " is added");
  }
  if (x->created_at_ms() != s.created_at_ms())
    return refused("schedule " + quoted(s.name()) + " exists already; delete it first");
  def.set_decided_until_ms(std::max(x->decided_until_ms(), s.decided_until_ms()));
  *x = def;
  return done("schedule " + quoted(s.name()) + (def.paused() ? " is paused" : " is running"));
}

cluster_outcome schedule_progress(pb::ClusterState* st, const pb::ScheduleProgress& p) {
  auto* x = find_schedule(st, p.name());
  if (x == nullptr || x->created_at_ms() != p.created_at_ms())
    return refused("no such schedule " + quoted(p.name()) + " (deleted, or added again)");
  x->set_decided_until_ms(std::max(x->decided_until_ms(), p.decided_until_ms()));
  return done("schedule " + quoted(p.name()) + " decided until "
              + std::to_string(x->decided_until_ms()));
}

}  // namespace

std::string encode_cluster_command(const pb::ClusterCommand& command) {
  const std::string body = command.SerializeAsString();
  std::string out(5, '\0');
  out[0] = 'C';
  const auto n = static_cast<uint32_t>(body.size());
  for (size_t i = 0; i < 4; ++i)
    out[1 + i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + body;
}

bool decode_cluster_command(std::string_view entry, pb::ClusterCommand* out) {
  if (entry.size() < 5 || entry[0] != 'C')
    return false;
  uint32_t n = 0;
  for (size_t i = 0; i < 4; ++i)
    n |= static_cast<uint32_t>(static_cast<uint8_t>(entry[1 + i])) << (8 * i);
  if (n > entry.size() - 5)
    return false;
  return out->ParseFromArray(entry.data() + 5, static_cast<int>(n));
}

const char* member_state_name(pb::MemberState s) {
  switch (s) {
    case pb::JOINING:
      return "joining";
    case pb::ACTIVE:
      return "active";
    case pb::DRAINING:
      return "draining";
    case pb::LEFT:
      return "left";
    case pb::FORGOTTEN:
      return "forgotten";
    default:
      return "unknown";
  }
}

bool member_takes_part(const pb::ClusterMember& m) {
  return m.state() == pb::JOINING || m.state() == pb::ACTIVE || m.state() == pb::DRAINING;
}

const pb::ClusterMember* find_member(const pb::ClusterState& state, std::string_view name) {
  for (const auto& m : state.members())
    if (m.name() == name)
      return &m;
  return nullptr;
}

std::vector<std::string> active_members(const pb::ClusterState& state) {
  std::vector<std::string> out;
  for (const auto& m : state.members())
    if (m.state() == pb::ACTIVE)
      out.push_back(m.name());
  return out;  // members are kept sorted by name
}

uint32_t command_feature_level(const pb::ClusterCommand& c) {
  using K = pb::ClusterCommand::CommandCase;
  switch (c.command_case()) {  // no default: a kind added without its level does not compile
    case K::kFound:
    case K::kJoin:
    case K::kActivate:
    case K::kDrain:
    case K::kRemove:
    case K::kForget:
    case K::kRaiseFloor:
    case K::kSetLimit:
    case K::kSetSchedule:
    case K::kScheduleProgress:
      return 1;
    case K::COMMAND_NOT_SET:
      break;
  }
  return UINT32_MAX;  // a kind this release does not know
}

uint32_t cluster_feature_level(const pb::ClusterState& state) {
  return std::max(1u, state.feature_level());
}

cluster_outcome apply_cluster_command(pb::ClusterState* state, const pb::ClusterCommand& c,
                                      uint64_t index) {
  using K = pb::ClusterCommand::CommandCase;
  const int64_t ms = c.proposed_ms();
  if (const auto need = command_feature_level(c); need > cluster_feature_level(*state))
    return refused(
      need == UINT32_MAX
        ? "a command this release does not know (of a newer release, whose commands wait "
          "until every member runs it; this release knows feature level "
            + std::to_string(release_feature_level) + ")"
        : "a command of feature level " + std::to_string(need) + ", above the cluster's "
            + std::to_string(cluster_feature_level(*state))
            + ": it is taken once every member runs a release that knows it");
  if (c.command_case() != K::kFound && state->cluster_id().empty())
    return refused("the cluster is not founded yet (proctor cluster init, on one node)");
  const std::string before = state->SerializeAsString();
  cluster_outcome out;
  switch (c.command_case()) {
    case K::kFound:
      out = found(state, c.found(), index, ms);
      break;
    case K::kJoin:
      out = join(state, c.join().member(), index, ms);
      break;
    case K::kActivate:
      out = activate(state, c.activate(), index, ms);
      break;
    case K::kDrain:
      out = drain(state, c.drain(), index, ms);
      break;
    case K::kRemove:
      out = remove(state, c.remove(), index, ms);
      break;
    case K::kForget:
      out = forget(state, c.forget(), index, ms);
      break;
    case K::kRaiseFloor:
      out = raise_floor(state, c.raise_floor());
      break;
    case K::kSetLimit:
      out = set_limit(state, c.set_limit().limit());
      break;
    case K::kSetSchedule:
      out = set_schedule(state, c.set_schedule().schedule());
      break;
    case K::kScheduleProgress:
      out = schedule_progress(state, c.schedule_progress());
      break;
    case K::COMMAND_NOT_SET:
      break;  // refused above
  }
  // Refused commands change nothing (each rule refuses before it writes); the version counts
  // the commands that changed something, so that nodes compare versions, not states.
  if (out.applied)
    raise_cluster_level(state);
  if (out.applied && state->SerializeAsString() != before)
    state->set_version(state->version() + 1);
  return out;
}

}  // namespace proctor
