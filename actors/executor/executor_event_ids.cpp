// Event ids (internal/event_ids.hpp; docs/concepts.md, "Events"): an event sent again with the
// id of one accepted before is answered as accepted and delivers nothing more, for as long as
// events are kept (the events' TTL), across restarts (its EventIdSeen record).
#include <spdlog/spdlog.h>

#include "actors/executor/internal/executor_state.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

namespace {

std::string accepted_again(const std::string& key, const std::string& id, int64_t at_ms) {
  return "event '" + key + "' with id '" + id + "' was accepted already (at " + utc_text(at_ms)
         + "): nothing more delivered";
}

void arm_sweep(executor_actor* self) {
  auto& ids = self->state.event_ids;
  if (ids.sweep_armed || ids.seen.empty())
    return;
  ids.sweep_armed = true;
  // Often enough that an id is dropped within a tenth of the TTL after it expired.
  auto every = std::max(std::chrono::milliseconds{100}, self->state.cfg.event_ttl / 10);
  self->delayed_send(self, every, event_id_sweep_atom::value);
}

}  // namespace

void event_ids_recovered(executor_actor* self, std::vector<recovered_event_id>& ids) {
  for (auto& r : ids) {
    auto& e = self->state.event_ids.seen[{r.key, r.id}];
    e.lsn = r.lsn;
    e.at_ms = r.at_ms;
  }
  arm_sweep(self);
}

bool event_seen(executor_actor* self, const std::string& key, const std::string& id,
                promise_t& rp) {
  if (id.empty())
    return false;
  auto& seen = self->state.event_ids.seen;
  auto i = seen.find({key, id});
  if (i == seen.end())
    return false;
  auto& e = i->second;
  if (e.lsn != 0 && e.at_ms + self->state.cfg.event_ttl.count() <= wall_ms())
    return false;  // kept as long as events are: past that, the same id is a new event
  if (e.lsn == 0) {
    e.waiting.push_back(std::move(rp));  // the first one is not durable yet
    return true;
  }
  pb::Response r;
  r.set_text(e.answer.empty() ? accepted_again(key, id, e.at_ms) : e.answer);
  spdlog::info("event '{}' with id '{}' sent again: accepted already, nothing delivered", key, id);
  reply(rp, encode(r));
  return true;
}

void event_id_staged(executor_actor* self, const std::string& key, const std::string& id,
                     int64_t at_ms, journal_batch& b) {
  pb::JournalRecord rec;
  auto* s = rec.mutable_event_id();
  s->set_event_key(key);
  s->set_event_id(id);
  s->set_at_ms(at_ms);
  b.entries.push_back(make_entry(journal_keys::meta_root, rec));
  auto& e = self->state.event_ids.seen[{key, id}];
  if (e.lsn != 0)  // an expired one the sweep has not dropped yet: its record goes with it
    b.deletes.push_back({journal_keys::meta_root, e.lsn, e.lsn + 1, 0});
  e.lsn = 0;
  e.answer.clear();
  e.at_ms = at_ms;
}

void event_id_accepted(executor_actor* self, const std::string& key, const std::string& id,
                       uint64_t lsn, const std::string& answer) {
  auto& e = self->state.event_ids.seen[{key, id}];
  e.lsn = lsn;
  e.answer = answer;
  pb::Response r;
  r.set_text(answer);
  for (auto& rp : std::exchange(e.waiting, {}))
    reply(rp, encode(r));
  arm_sweep(self);
}

void sweep_event_ids(executor_actor* self) {
  auto& st = self->state;
  auto& ids = st.event_ids;
  ids.sweep_armed = false;
  const auto expired_before = wall_ms() - st.cfg.event_ttl.count();
  journal_batch b;
  for (auto i = ids.seen.begin(); i != ids.seen.end();) {
    if (i->second.lsn == 0 || i->second.at_ms > expired_before) {
      ++i;
      continue;
    }
    b.deletes.push_back({journal_keys::meta_root, i->second.lsn, i->second.lsn + 1, 0});
    i = ids.seen.erase(i);
  }
  if (!b.deletes.empty())
    append(self, std::move(b));  // (lost in a crash: read back, and swept again)
  arm_sweep(self);
}

}  // namespace proctor::exec_detail
