#include "actors/wire/json/status_json.hpp"

#include <cstdint>

#include <proctor/journal.pb.h>

#include "actors/wire/incarnation_hex.hpp"
#include "actors/wire/json/json_writer.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

namespace {

/// nlohmann's SAX parser (it does not recurse) told to stop past `max_depth` levels: a text
/// nested deeper is not one is_valid_json accepts (nor one every reader of ours would take).
class depth_limited : public nlohmann::json_sax<nlohmann::json> {
public:
  static constexpr size_t max_depth = 200;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth_ <= max_depth; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override { return ++depth_ <= max_depth; }
  bool end_array() override { return --depth_, true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

private:
  size_t depth_ = 0;
};

std::string_view trim(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && ws(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && ws(s.back()))
    s.remove_suffix(1);
  return s;
}

/// The result field: the text itself when it is JSON, null when empty, else a JSON string.
ordered_json result_field(json_writer& w, const std::string& result_json) {
  auto text = trim(result_json);
  if (text.empty())
    return nullptr;
  if (!is_valid_json(text))
    return result_json;
  return w.raw(text);
}

std::string state_name(int state) {
  if (pb::ProcState_IsValid(state))
    return pb::ProcState_Name(static_cast<pb::ProcState>(state));
  return "UNKNOWN";
}

ordered_json status_object(json_writer& w, const pb::ProcStatus& s) {
  auto children = ordered_json::array();
  for (auto c : s.children())
    children.push_back(c);
  json_members j(10);
  j("id", s.id())("type", s.type())("state", state_name(s.state()))("root_id", s.root_id())(
    "parent_id", s.parent_id())("children", std::move(children))("error", s.error())(
    "result", result_field(w, s.result_json()))("waiting_for", s.waiting_for());
  if (!s.node().empty())
    j("node", s.node());
  if (s.resubmitted_from() != 0)
    j("resubmitted_from", s.resubmitted_from());
  if (s.resubmitted_as() != 0)
    j("resubmitted_as", s.resubmitted_as());
  return j.take();
}

ordered_json time_field(int64_t ms) {
  return ms <= 0 ? ordered_json(nullptr) : ordered_json(utc_text(ms));
}

}  // namespace

ordered_json status_json_value(json_writer& w, const pb::ProcStatus& s) {
  return status_object(w, s);
}

ordered_json result_json_value(json_writer& w, const std::string& result_json) {
  return result_field(w, result_json);
}

std::string result_to_json(const std::string& result_json) {
  json_writer w;
  return w.dump(result_field(w, result_json));
}

std::string json_quote(std::string_view s) {
  return dump_string(s);
}

bool is_valid_json(std::string_view text) {
  // nlohmann skips a UTF-8 byte order mark before the value, and takes a NUL byte for the
  // end of the input (found by the wire_message fuzzer: "3\0x" passed). JSON text has
  // neither: a NUL could only be in a string, where control characters must be escaped.
  if (text.substr(0, 3) == "\xEF\xBB\xBF" || text.find('\0') != std::string_view::npos)
    return false;
  depth_limited sax;
  return nlohmann::json::sax_parse(text, &sax);
}

std::string status_to_json(const pb::ProcStatus& s) {
  json_writer w;
  return w.dump(status_object(w, s));
}

// `list --json` of 100k procedures, in the CLI: 120 ms here where the string appends it
// replaced took 13 ms; 380 ms where each has a result (parsed to check it is JSON), where the
// old code, which also ran protobuf's parser on each, took 850 ms (micro benchmark, 2026-11-25,
// a loaded 2-core host). Not worth a JSON writer of our own.
std::string list_to_json(const google::protobuf::RepeatedPtrField<pb::ProcStatus>& xs) {
  json_writer w;
  auto list = ordered_json::array();
  for (const auto& s : xs)
    list.push_back(status_object(w, s));
  return w.dump(list);
}

std::string quarantine_to_json(const google::protobuf::RepeatedPtrField<pb::Quarantined>& xs) {
  auto list = ordered_json::array();
  for (const auto& q : xs)
    list.push_back({{"root_id", q.root_id()}, {"reason", q.reason()}, {"records", q.records()}});
  return json_writer{}.dump(list);
}

namespace {

/// 16 hex digits (a JSON number would lose the low bits past 2^53); null when unknown.
ordered_json incarnation_field(uint64_t i) {
  if (i == 0)
    return nullptr;
  return incarnation_hex(i);
}

}  // namespace

std::string nodes_to_json(const google::protobuf::RepeatedPtrField<pb::NodeStatus>& xs) {
  auto list = ordered_json::array();
  for (const auto& n : xs) {
    ordered_json j = {{"name", n.name()},
                      {"address", n.address()},
                      {"number", n.number()},
                      {"self", n.self()},
                      {"up", n.up()},
                      {"since", time_field(n.since_ms())},
                      {"reason", n.reason()},
                      {"rtt_us", n.rtt_us()},
                      {"outbox", n.outbox()},
                      {"live", n.live()},
                      {"started_at", time_field(n.started_at_ms())},
                      {"incarnation", incarnation_field(n.incarnation())}};
    if (n.forgotten_at_ms() != 0)
      j["forgotten"] = {{"at", time_field(n.forgotten_at_ms())},
                        {"incarnation", incarnation_field(n.forgotten_incarnation())}};
    if (n.has_process()) {
      const auto& p = n.process();
      j["process"] = {{"pid", p.pid()},
                      {"host", p.host()},
                      {"epoch", p.epoch()},
                      {"active_since", time_field(p.active_since_ms())},
                      {"takeover_ms", p.takeover_ms() > 0 ? ordered_json(p.takeover_ms())
                                                          : ordered_json(nullptr)}};
    }
    if (n.has_group()) {
      const auto& g = n.group();
      auto members = ordered_json::array();
      for (const auto& m : g.replicas())
        members.push_back({{"name", m.name()},
                           {"address", m.address()},
                           {"role", m.role()},
                           {"voter", m.voter()},
                           {"stored_index", m.match_index()},
                           {"lag", m.lag()},
                           {"reachable", m.reachable()}});
      j["replicas"] = {{"term", g.term()},
                       {"leader", g.leader()},
                       {"commit_index", g.commit_index()},
                       {"members", std::move(members)}};
    }
    list.push_back(std::move(j));
  }
  return json_writer{}.dump(list);
}

}  // namespace proctor
