#include "apps/views_json.hpp"

#include <map>
#include <vector>

#include "actors/wall_clock.hpp"
#include "apps/status_json.hpp"

namespace proctor {

namespace {

std::string time_field(int64_t ms) {
  return ms <= 0 ? std::string("null") : json_quote(utc_text(ms));
}

std::string state_field(int state) {
  return pb::ProcState_IsValid(state) ? pb::ProcState_Name(static_cast<pb::ProcState>(state))
                                      : std::string("UNKNOWN");
}

struct tree_index {
  std::map<uint64_t, const pb::ProcStatus*> by_id;
  int64_t now_ms = 0;

  std::string object(const pb::ProcStatus& s) const {
    auto end = s.ended_at_ms() != 0 ? s.ended_at_ms() : now_ms;
    auto duration = s.started_at_ms() != 0 ? std::to_string(end - s.started_at_ms()) : "null";
    std::vector<const pb::ProcStatus*> kids;
    size_t done = 0;
    for (auto c : s.children()) {
      auto i = by_id.find(c);
      if (i == by_id.end() || i->second == &s)
        continue;
      kids.push_back(i->second);
      done += has_ended(*i->second) ? 1 : 0;
    }
    std::string out = "{\"id\":" + std::to_string(s.id()) + ",\"type\":" + json_quote(s.type())
                      + ",\"state\":\"" + state_field(s.state()) + "\",\"waiting_for\":"
                      + json_quote(s.waiting_for()) + ",\"node\":" + json_quote(s.node())
                      + ",\"parent_id\":" + std::to_string(s.parent_id()) + ",\"error\":"
                      + json_quote(s.error()) + ",\"result\":" + result_to_json(s.result_json())
                      + ",\"started_at\":" + time_field(s.started_at_ms())
                      + ",\"since\":" + time_field(s.since_ms())
                      + ",\"ended_at\":" + time_field(s.ended_at_ms())
                      + ",\"duration_ms\":" + duration + ",\"bypassed\":"
                      + (s.bypassed() ? "true" : "false") + ",\"done\":" + std::to_string(done)
                      + ",\"total\":" + std::to_string(kids.size()) + ",\"children\":[";
    for (size_t i = 0; i < kids.size(); ++i)
      out += (i > 0 ? "," : "") + object(*kids[i]);
    return out + "]}";
  }
};

} // namespace

std::string tree_to_json(const google::protobuf::RepeatedPtrField<pb::ProcStatus>& xs,
                         int64_t now_ms) {
  if (xs.empty())
    return "null";
  tree_index t;
  t.now_ms = now_ms;
  for (const auto& s : xs)
    t.by_id.emplace(s.id(), &s);
  return t.object(xs[0]);
}

std::string history_to_json(const pb::History& h) {
  std::string out = "{\"status\":" + status_to_json(h.status()) + ",\"note\":"
                    + json_quote(h.note()) + ",\"entries\":[";
  int64_t previous = 0;
  for (int i = 0; i < h.entries_size(); ++i) {
    const auto& e = h.entries(i);
    auto since = previous != 0 && e.at_ms() != 0 ? std::to_string(e.at_ms() - previous) : "null";
    if (e.at_ms() != 0)
      previous = e.at_ms();
    out += std::string(i > 0 ? "," : "") + "{\"lsn\":" + std::to_string(e.lsn())
           + ",\"kind\":" + json_quote(e.kind()) + ",\"state\":" + std::to_string(e.state())
           + ",\"state_name\":" + json_quote(e.state_name())
           + ",\"next_state\":" + std::to_string(e.next_state())
           + ",\"next_state_name\":" + json_quote(e.next_state_name())
           + ",\"attempt\":" + std::to_string(e.attempt()) + ",\"at\":" + time_field(e.at_ms())
           + ",\"at_ms\":" + std::to_string(e.at_ms())
           + ",\"took_us\":" + std::to_string(e.took_us()) + ",\"since_previous_ms\":" + since
           + ",\"detail\":" + json_quote(e.detail()) + "}";
  }
  return out + "]}";
}

std::string locks_to_json(const google::protobuf::RepeatedPtrField<pb::LockInfo>& xs) {
  std::string out = "[";
  for (int i = 0; i < xs.size(); ++i) {
    const auto& l = xs[i];
    out += std::string(i > 0 ? "," : "") + "{\"resource\":" + json_quote(l.resource())
           + ",\"mode\":\"" + (l.exclusive() ? "exclusive" : "shared")
           + "\",\"proc_id\":" + std::to_string(l.proc_id())
           + ",\"root_id\":" + std::to_string(l.root_id())
           + ",\"held\":" + (l.held() ? "true" : "false")
           + ",\"blocked_by\":" + json_quote(l.blocked_by()) + "}";
  }
  return out + "]";
}

} // namespace proctor
