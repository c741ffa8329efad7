#include "apps/status_json.hpp"

#include <cstdint>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "actors/wall_clock.hpp"
#include "journal.pb.h"

namespace proctor {

namespace {

/// Length of the well-formed UTF-8 sequence starting at `s[i]` (1 to 4), or 0 if the bytes
/// there are not one (overlong forms, surrogates and code points past U+10FFFF included).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return k < s.size() && byte(k) >= lo && byte(k) <= hi;
  };
  auto c = byte(i);
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    auto lo = c == 0xE0 ? 0xA0 : 0x80;
    auto hi = c == 0xED ? 0x9F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    auto lo = c == 0xF0 ? 0x90 : 0x80;
    auto hi = c == 0xF4 ? 0x8F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// A strict RFC 8259 recognizer. protobuf's JSON parser, used as a second check, is more
/// lenient (unquoted keys, single quotes, trailing commas), and embedding such text verbatim
/// would make our output invalid JSON.
class json_checker {
public:
  explicit json_checker(std::string_view text) : s_(text) {}

  bool run() {
    skip_ws();
    if (!value(0))
      return false;
    skip_ws();
    return pos_ == s_.size();
  }

private:
  static constexpr int max_depth = 200;

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return s_[pos_]; }

  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r'))
      ++pos_;
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word)
      return false;
    pos_ += word.size();
    return true;
  }

  bool value(int depth) {
    if (at_end() || depth > max_depth)
      return false;
    switch (peek()) {
      case '{': return object(depth + 1);
      case '[': return array(depth + 1);
      case '"': return string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }

  bool object(int depth) {
    ++pos_;  // '{'
    skip_ws();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (at_end() || peek() != '"' || !string())
        return false;
      skip_ws();
      if (at_end() || peek() != ':')
        return false;
      ++pos_;
      skip_ws();
      if (!value(depth))
        return false;
      skip_ws();
      if (at_end())
        return false;
      if (peek() == '}') {
        ++pos_;
        return true;
      }
      if (peek() != ',')
        return false;
      ++pos_;
    }
  }

  bool array(int depth) {
    ++pos_;  // '['
    skip_ws();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (!value(depth))
        return false;
      skip_ws();
      if (at_end())
        return false;
      if (peek() == ']') {
        ++pos_;
        return true;
      }
      if (peek() != ',')
        return false;
      ++pos_;
    }
  }

  bool string() {
    ++pos_;  // '"'
    while (!at_end()) {
      auto c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20)
        return false;
      if (c == '\\') {
        ++pos_;
        if (at_end())
          return false;
        switch (peek()) {
          case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            ++pos_;
            break;
          case 'u':
            ++pos_;
            for (int k = 0; k < 4; ++k, ++pos_)
              if (at_end() || !is_hex(peek()))
                return false;
            break;
          default:
            return false;
        }
        continue;
      }
      auto n = utf8_sequence_length(s_, pos_);
      if (n == 0)
        return false;
      pos_ += n;
    }
    return false;
  }

  bool digits() {
    auto start = pos_;
    while (!at_end() && is_digit(peek()))
      ++pos_;
    return pos_ > start;
  }

  bool number() {
    if (!at_end() && peek() == '-')
      ++pos_;
    if (at_end())
      return false;
    if (peek() == '0')
      ++pos_;
    else if (!digits())
      return false;
    if (!at_end() && peek() == '.') {
      ++pos_;
      if (!digits())
        return false;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-'))
        ++pos_;
      if (!digits())
        return false;
    }
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

std::string_view trim(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && ws(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && ws(s.back()))
    s.remove_suffix(1);
  return s;
}

/// The result field: raw JSON, null, or (for text that is not JSON) a JSON string.
std::string result_field(const std::string& result_json) {
  auto text = trim(result_json);
  if (text.empty())
    return "null";
  if (!is_valid_json(text))
    return json_quote(result_json);
  google::protobuf::Value parsed;
  if (!google::protobuf::util::JsonStringToMessage(std::string{text}, &parsed).ok())
    return json_quote(result_json);
  return std::string{text};
}

std::string state_name(int state) {
  if (pb::ProcState_IsValid(state))
    return pb::ProcState_Name(static_cast<pb::ProcState>(state));
  return "UNKNOWN";
}

} // namespace

std::string result_to_json(const std::string& result_json) {
  return result_field(result_json);
}

std::string json_quote(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      default: break;
    }
    if (c < 0x20 || c == 0x7F) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 0xF];
      ++i;
      continue;
    }
    auto n = utf8_sequence_length(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    out.append(s.data() + i, n);
    i += n;
  }
  out += '"';
  return out;
}

bool is_valid_json(std::string_view text) { return json_checker{text}.run(); }

std::string status_to_json(const pb::ProcStatus& s) {
  std::string out;
  out.reserve(160 + s.result_json().size() + s.error().size());
  out += "{\"id\":";
  out += std::to_string(s.id());
  out += ",\"type\":";
  out += json_quote(s.type());
  out += ",\"state\":\"";
  out += state_name(s.state());
  out += "\",\"root_id\":";
  out += std::to_string(s.root_id());
  out += ",\"parent_id\":";
  out += std::to_string(s.parent_id());
  out += ",\"children\":[";
  for (int i = 0; i < s.children_size(); ++i) {
    if (i > 0)
      out += ',';
    out += std::to_string(s.children(i));
  }
  out += "],\"error\":";
  out += json_quote(s.error());
  out += ",\"result\":";
  out += result_field(s.result_json());
  out += ",\"waiting_for\":";
  out += json_quote(s.waiting_for());
  if (!s.node().empty()) {
    out += ",\"node\":";
    out += json_quote(s.node());
  }
  out += '}';
  return out;
}

std::string list_to_json(const google::protobuf::RepeatedPtrField<pb::ProcStatus>& xs) {
  std::string out = "[";
  bool first = true;
  for (const auto& s : xs) {
    if (!first)
      out += ',';
    first = false;
    out += status_to_json(s);
  }
  out += ']';
  return out;
}

std::string quarantine_to_json(const google::protobuf::RepeatedPtrField<pb::Quarantined>& xs) {
  std::string out = "[";
  for (int i = 0; i < xs.size(); ++i) {
    if (i > 0)
      out += ',';
    out += "{\"root_id\":" + std::to_string(xs[i].root_id()) + ",\"reason\":"
           + json_quote(xs[i].reason()) + ",\"records\":" + std::to_string(xs[i].records()) + '}';
  }
  out += ']';
  return out;
}

std::string nodes_to_json(const google::protobuf::RepeatedPtrField<pb::NodeStatus>& xs) {
  auto time_field = [](int64_t ms) { return ms <= 0 ? std::string("null") : json_quote(utc_text(ms)); };
  std::string out = "[";
  for (int i = 0; i < xs.size(); ++i) {
    const auto& n = xs[i];
    if (i > 0)
      out += ',';
    out += "{\"name\":" + json_quote(n.name()) + ",\"address\":" + json_quote(n.address())
           + ",\"number\":" + std::to_string(n.number()) + ",\"self\":"
           + (n.self() ? "true" : "false") + ",\"up\":" + (n.up() ? "true" : "false")
           + ",\"since\":" + time_field(n.since_ms()) + ",\"reason\":" + json_quote(n.reason())
           + ",\"rtt_us\":" + std::to_string(n.rtt_us()) + ",\"outbox\":"
           + std::to_string(n.outbox()) + ",\"live\":" + std::to_string(n.live())
           + ",\"started_at\":" + time_field(n.started_at_ms());
    if (n.has_process()) {
      const auto& p = n.process();
      out += ",\"process\":{\"pid\":" + std::to_string(p.pid()) + ",\"host\":"
             + json_quote(p.host()) + ",\"epoch\":" + std::to_string(p.epoch())
             + ",\"active_since\":" + time_field(p.active_since_ms()) + ",\"takeover_ms\":"
             + (p.takeover_ms() > 0 ? std::to_string(p.takeover_ms()) : std::string("null"))
             + '}';
    }
    out += '}';
  }
  out += ']';
  return out;
}

} // namespace proctor
