// libFuzzer target for wire-message decoding: what the executor and the CLI do with bytes and
// text they receive. The first input byte (mod 6) picks a mode; the rest is its input.
//   0  pb::Request from bytes, as the executor's handle_request: parse, re-serialization round
//      trip, then for a submit what handle_submit does (registry::make_from_json, the
//      Submitted record journaled, folded back and recreated as recovery does), for an event
//      the status a woken demo.wait_event would show.
//   1  registry::make_from_json with the demo types: a type (the next byte picks a demo type,
//      or >= 0xF0: the text up to a NUL) and the args JSON after it, both made valid UTF-8 as
//      the wire guarantees.
//   2  pb::ProcStatus from bytes, rendered by the CLI's status_to_json.
//   3  pb::Response from bytes, as the CLI reads it: status_to_json and list_to_json.
//   4  text: is_valid_json against this file's own recognizer, and json_quote's output.
//   5  the client protocol's framing (actors/wire/wire_frame.hpp): a byte stream fed to a
//      frame_reader in chunks (sizes from the input); the frames it returns, framed again,
//      must be exactly the bytes it consumed, however the stream was cut, and a refused
//      length must be one check_frame_length refuses.
// Every JSON text the CLI prints is checked with this file's own RFC 8259 recognizer
// (json_scan), written apart from actors/wire/json/status_json.cpp so the two check each other; it
// holds to the limits is_valid_json documents (numbers within a double's range, surrogate
// escapes in pairs).
// PROCTOR_FUZZ_STRICT=1 also requires registry errors to be one line, as registry.hpp says.
//
// Built with -DPROCTOR_FUZZ_SEEDS_MAIN instead, this file is a tool that writes the seed
// corpus into a directory.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <proctor/journal.pb.h>
#include <proctor/registry.hpp>
#include <proctor/wire.pb.h>

#include "actors/wire/json/status_json.hpp"
#include "actors/wire/wire_frame.hpp"
#include "persistence/tree_image.hpp"
#include "procedures/demo.hpp"

namespace {

using namespace proctor;
using google::protobuf::util::MessageDifferencer;

/// The executor's default limit on a submit's args JSON (executor.hpp, max_args_bytes).
constexpr size_t max_args_bytes = 1 << 20;
/// Deeper texts are not compared with is_valid_json, which stops at 200 levels by design.
constexpr size_t max_compared_depth = 150;

bool strict = false;
const registry* types = nullptr;

[[noreturn]] void fail(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "wire_message_fuzzer: invariant violated: %s%s%.*s\n", what,
               detail.empty() ? "" : ": ", static_cast<int>(std::min<size_t>(detail.size(), 2000)),
               detail.data());
  std::abort();
}

/// Like assert, always on; the detail (any further arguments) is built only on failure.
#define REQUIRE(ok, ...) ((ok) ? void() : fail(__VA_ARGS__))

// -- an independent JSON recognizer -------------------------------------------------------------

/// Length of the well-formed UTF-8 character at `s[i]`, 0 if the bytes there are not one.
/// Decodes the code point, then rejects overlong forms, surrogates and values past U+10FFFF.
size_t utf8_char(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80)
    return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  }
  static constexpr uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

bool hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool digit(char c) {
  return c >= '0' && c <= '9';
}

struct json_verdict {
  bool valid = false;
  size_t depth = 0;  ///< deepest nesting of arrays and objects seen
};

/// RFC 8259 as a pushdown automaton over tokens (no recursion, no depth limit).
class json_scan {
public:
  explicit json_scan(std::string_view s) : s_(s) {}

  json_verdict run() {
    enum class want { value, value_or_close, key, key_or_close, colon, comma_or_close, end };
    std::vector<char> open;
    json_verdict v;
    want w = want::value;
    auto after_value = [&] { w = open.empty() ? want::end : want::comma_or_close; };
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    for (;;) {
      while (i_ < s_.size() && space(s_[i_]))
        ++i_;
      if (i_ == s_.size()) {
        v.valid = w == want::end;
        return v;
      }
      char c = s_[i_];
      switch (w) {
        case want::value_or_close:
          if (c == ']') {
            open.pop_back();
            ++i_;
            after_value();
            break;
          }
          [[fallthrough]];
        case want::value:
          if (c == '{' || c == '[') {
            open.push_back(c);
            v.depth = std::max(v.depth, open.size());
            ++i_;
            w = c == '{' ? want::key_or_close : want::value_or_close;
            break;
          }
          if (!scalar())
            return v;
          after_value();
          break;
        case want::key_or_close:
          if (c == '}') {
            open.pop_back();
            ++i_;
            after_value();
            break;
          }
          [[fallthrough]];
        case want::key:
          if (c != '"' || !string())
            return v;
          w = want::colon;
          break;
        case want::colon:
          if (c != ':')
            return v;
          ++i_;
          w = want::value;
          break;
        case want::comma_or_close:
          if (c == ',') {
            ++i_;
            w = open.back() == '{' ? want::key : want::value;
            break;
          }
          if (c != (open.back() == '{' ? '}' : ']'))
            return v;
          open.pop_back();
          ++i_;
          after_value();
          break;
        case want::end:
          return v;
      }
    }
  }

private:
  bool scalar() {
    switch (s_[i_]) {
      case '"':
        return string();
      case 't':
        return word("true");
      case 'f':
        return word("false");
      case 'n':
        return word("null");
      default:
        return number();
    }
  }

  bool word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w)
      return false;
    i_ += w.size();
    return true;
  }

  bool digits() {
    if (i_ >= s_.size() || !digit(s_[i_]))
      return false;
    while (i_ < s_.size() && digit(s_[i_]))
      ++i_;
    return true;
  }

  /// The code unit of the \uXXXX escape at `s_[at]`, or -1 if there is none.
  long escaped_unit(size_t at) const {
    if (at + 6 > s_.size() || s_[at] != '\\' || s_[at + 1] != 'u')
      return -1;
    for (size_t k = 2; k < 6; ++k)
      if (!hex_digit(s_[at + k]))
        return -1;
    return std::stol(std::string(s_.substr(at + 2, 4)), nullptr, 16);
  }

  bool number() {
    auto start = i_;
    if (!number_syntax())
      return false;
    // Within a double's range (is_valid_json's limit, actors/wire/json/status_json.hpp).
    return std::isfinite(std::strtod(std::string(s_.substr(start, i_ - start)).c_str(), nullptr));
  }

  bool number_syntax() {
    if (s_[i_] == '-')
      ++i_;
    if (i_ < s_.size() && s_[i_] == '0')
      ++i_;
    else if (i_ >= s_.size() || s_[i_] < '1' || s_[i_] > '9' || !digits())
      return false;
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!digits())
        return false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-'))
        ++i_;
      if (!digits())
        return false;
    }
    return true;
  }

  bool string() {
    ++i_;
    while (i_ < s_.size()) {
      auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20)
        return false;
      if (c == '\\') {
        if (i_ + 1 >= s_.size())
          return false;
        char e = s_[i_ + 1];
        if (e == 'u') {
          auto unit = escaped_unit(i_);
          if (unit < 0)
            return false;
          i_ += 6;
          // Surrogates in pairs, high then low (is_valid_json's limit,
          // actors/wire/json/status_json.hpp).
          if (unit >= 0xDC00 && unit <= 0xDFFF)
            return false;
          if (unit >= 0xD800 && unit <= 0xDBFF) {
            auto low = escaped_unit(i_);
            if (low < 0xDC00 || low > 0xDFFF)
              return false;
            i_ += 6;
          }
          continue;
        }
        if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos)
          return false;
        i_ += 2;
        continue;
      }
      auto n = utf8_char(s_, i_);
      if (n == 0)
        return false;
      i_ += n;
    }
    return false;
  }

  std::string_view s_;
  size_t i_ = 0;
};

json_verdict scan_json(std::string_view s) {
  return json_scan{s}.run();
}

/// Valid by both recognizers (is_valid_json only where the nesting is within its limit).
void require_json(std::string_view text, const char* what) {
  auto v = scan_json(text);
  REQUIRE(v.valid, what, text);
  if (v.depth <= max_compared_depth)
    REQUIRE(is_valid_json(text), "is_valid_json rejects valid JSON", text);
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// The bytes a JSON string literal (already checked valid) stands for; \u escapes of the
/// BMP only, as json_quote never writes surrogate pairs.
std::string unquote(std::string_view q) {
  std::string out;
  for (size_t i = 1; i + 1 < q.size(); ++i) {
    if (q[i] != '\\') {
      out += q[i];
      continue;
    }
    char e = q[++i];
    switch (e) {
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        auto cp = static_cast<uint32_t>(std::stoul(std::string(q.substr(i + 1, 4)), nullptr, 16));
        REQUIRE(cp < 0xD800 || cp > 0xDFFF, "json_quote wrote a surrogate escape", q);
        append_utf8(out, cp);
        i += 4;
        break;
      }
      default:
        out += e;
        break;
    }
  }
  return out;
}

/// Length of the maximal subpart at `s[i]`, where no well-formed character starts: the
/// longest prefix of one (at least a byte), by the table of well-formed sequences (Unicode
/// 15.0, table 3-7).
size_t maximal_subpart(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    lo = c == 0xE0 ? 0xA0 : 0x80;
    hi = c == 0xED ? 0x9F : 0xBF;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    lo = c == 0xF0 ? 0x90 : 0x80;
    hi = c == 0xF4 ? 0x8F : 0xBF;
  } else {
    return 1;
  }
  size_t k = 1;
  for (; k < n && i + k < s.size(); ++k) {
    auto b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF))
      break;
  }
  return k;
}

/// `s` with each maximal ill-formed subsequence replaced by one U+FFFD ("U+FFFD
/// substitution of maximal subparts", Unicode 15.0 section 3.9), as json_quote does.
std::string utf8_repaired(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    auto n = utf8_char(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      i += maximal_subpart(s, i);
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

void check_quote(std::string_view text) {
  auto q = json_quote(text);
  auto v = scan_json(q);
  REQUIRE(v.valid && q.size() >= 2 && q.front() == '"', "json_quote wrote invalid JSON", q);
  for (unsigned char c : q)
    REQUIRE(c >= 0x20 && c != 0x7F, "json_quote left a control character", q);
  REQUIRE(unquote(q) == utf8_repaired(text), "json_quote changed the text", q);
}

// -- what the CLI prints ------------------------------------------------------------------------

std::string_view trim(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && ws(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && ws(s.back()))
    s.remove_suffix(1);
  return s;
}

void check_status(const pb::ProcStatus& s) {
  auto out = status_to_json(s);
  require_json(out, "status_to_json wrote invalid JSON");
  auto head = "{\"id\":" + std::to_string(s.id()) + ",\"type\":";
  REQUIRE(out.compare(0, head.size(), head) == 0, "status_to_json does not start with the id", out);
  if (trim(s.result_json()).empty())
    REQUIRE(out.find(",\"result\":null,\"waiting_for\":") != std::string::npos,
            "an empty result is not rendered as null", out);
}

template <class Message>
void check_round_trip(const Message& m, const char* what) {
  auto bytes = m.SerializeAsString();
  Message back;
  REQUIRE(back.ParseFromString(bytes), what, "re-serialized message does not parse");
  REQUIRE(MessageDifferencer::Equals(m, back), what, "re-parsed message differs");
  REQUIRE(back.SerializeAsString() == bytes, what, "serialization is not stable");
}

// -- what a submit does -------------------------------------------------------------------------

bool valid_utf8(std::string_view s) {
  for (size_t i = 0, n = 0; i < s.size(); i += n)
    if ((n = utf8_char(s, i)) == 0)
      return false;
  return true;
}

/// The executor sends the error back in Response.error, a proto3 string: from valid UTF-8
/// input (all the wire can carry) it must be valid UTF-8 too, or the CLI cannot parse it.
void check_error(std::string_view type, const std::string& args, const std::string& error) {
  REQUIRE(!error.empty(), "registry refused without a reason");
  if (valid_utf8(type) && valid_utf8(args))
    REQUIRE(valid_utf8(error), "registry error is not valid UTF-8", error);
  if (strict)
    REQUIRE(error.find('\n') == std::string::npos, "registry error is not one line", error);
}

/// `p` was accepted for `type`: its data as journaled must bring it back, as recovery does.
void check_accepted(std::string_view type, procedure& p) {
  auto bytes = p.data().SerializeAsString();
  std::string error;
  auto back = types->make_from_bytes(type, bytes, &error);
  REQUIRE(back != nullptr, "accepted args do not load from their journaled bytes", error);
  REQUIRE(MessageDifferencer::Equals(p.data(), back->data()),
          "data loaded from the journal differs", p.data().ShortDebugString());
  (void)p.state_name(p.initial_state());
  (void)p.rollback_supported(p.initial_state());
}

std::unique_ptr<procedure> make(std::string_view type, const std::string& args) {
  std::string error;
  auto p = types->make_from_json(type, args, &error);
  if (p == nullptr)
    check_error(type, args, error);
  else
    check_accepted(type, *p);
  return p;
}

/// handle_submit: the Submitted record of an accepted submit must fold into a tree whose root
/// recovery can recreate.
void check_submit(const pb::SubmitRequest& req) {
  if (req.args_json().size() > max_args_bytes)
    return;
  auto p = make(req.type(), req.args_json());
  if (p == nullptr)
    return;
  pb::JournalRecord rec;
  rec.set_format(1);
  auto* s = rec.mutable_submitted();
  s->set_proc_id(1);
  s->set_type(req.type());
  s->set_type_version(types->find(req.type())->version);
  s->set_data(p->data().SerializeAsString());
  s->set_state(p->initial_state());
  s->set_nonce(req.nonce());
  s->set_priority(req.priority());
  tree_folder f(1);
  f.add(1, rec.SerializeAsString());
  auto t = f.finish();
  REQUIRE(t.corrupt.empty(), "a submit's Submitted record does not fold", t.corrupt);
  const auto* root = t.root();
  REQUIRE(root != nullptr && root->type == req.type() && root->nonce == req.nonce(),
          "a submit's Submitted record folds into another procedure");
  std::string error;
  REQUIRE(types->make_from_bytes(root->type, root->data, &error) != nullptr,
          "recovery cannot recreate a submitted procedure", error);
}

void fuzz_request(std::string_view bytes) {
  pb::Request req;
  if (!req.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return;
  check_round_trip(req, "pb::Request");
  switch (req.body_case()) {
    case pb::Request::kSubmit:
      check_submit(req.submit());
      break;
    case pb::Request::kEvent: {
      // demo.wait_event ends with done(payload): the CLI then prints it as the result.
      pb::ProcStatus s;
      s.set_id(1);
      s.set_type("demo.wait_event");
      s.set_state(pb::SUCCESS);
      s.set_root_id(1);
      s.set_result_json(req.event().payload_json());
      s.set_waiting_for(req.event().key());
      check_status(s);
      break;
    }
    default:
      break;
  }
}

void fuzz_registry(std::string_view in) {
  if (in.empty())
    return;
  static const auto names = types->names();
  auto pick = static_cast<unsigned char>(in[0]);
  in.remove_prefix(1);
  std::string type;
  if (pick >= 0xF0) {
    auto nul = in.find('\0');
    type = in.substr(0, nul);
    in.remove_prefix(nul == std::string_view::npos ? in.size() : nul + 1);
  } else {
    type = names[pick % names.size()];
  }
  // The wire carries only valid UTF-8 (pb::Request does not parse otherwise).
  make(utf8_repaired(type), utf8_repaired(in));
}

void fuzz_status(std::string_view bytes) {
  pb::ProcStatus s;
  if (s.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    check_status(s);
}

void fuzz_response(std::string_view bytes) {
  pb::Response r;
  if (!r.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return;
  check_round_trip(r, "pb::Response");
  check_status(r.status());
  require_json(list_to_json(r.list()), "list_to_json wrote invalid JSON");
}

void fuzz_text(std::string_view text) {
  auto v = scan_json(text);
  if (v.depth <= max_compared_depth)
    REQUIRE(v.valid == is_valid_json(text),
            v.valid ? "is_valid_json rejects valid JSON" : "is_valid_json accepts invalid JSON",
            text);
  check_quote(text);
}

void fuzz_frames(std::string_view in) {
  if (in.size() < 2)
    return;
  // Byte 0: the limit (small ones reach the refusal path) and whether empty frames pass;
  // byte 1: the chunk size pattern.
  auto sel = static_cast<unsigned char>(in[0]);
  size_t limit = sel & 0x40 ? max_frame_bytes : static_cast<size_t>(sel & 0x3F);
  bool allow_empty = (sel & 0x80) != 0;
  auto step = static_cast<size_t>(static_cast<unsigned char>(in[1]) % 17) + 1;
  in.remove_prefix(2);
  frame_reader r{limit, allow_empty};
  std::string rebuilt;
  std::string payload;
  size_t fed = 0;
  bool refused = false;
  while (!refused && (fed < in.size() || r.buffered() > 0)) {
    auto n = std::min(step, in.size() - fed);
    r.append(in.substr(fed, n));
    fed += n;
    for (;;) {
      auto st = r.next(&payload);
      if (st == frame_reader::status::frame) {
        REQUIRE(payload.size() <= limit, "a frame past the limit was returned");
        REQUIRE(allow_empty || !payload.empty(), "an empty frame was returned");
        rebuilt += make_frame(payload);
        continue;
      }
      if (st == frame_reader::status::refused) {
        REQUIRE(check_frame_length(r.refused_length(), limit, allow_empty) != frame_check::ok,
                "a valid length was refused");
        refused = true;
      }
      break;
    }
    if (n == 0)
      break;
  }
  REQUIRE(in.substr(0, rebuilt.size()) == rebuilt, "frames differ from the bytes consumed");
  if (!refused)
    REQUIRE(rebuilt.size() + r.buffered() == in.size(), "bytes lost between frames");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  static registry r;
  register_demo_procedures(r);
  types = &r;
  const char* s = std::getenv("PROCTOR_FUZZ_STRICT");
  strict = s != nullptr && std::strcmp(s, "1") == 0;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0:
      fuzz_request(rest);
      break;
    case 1:
      fuzz_registry(rest);
      break;
    case 2:
      fuzz_status(rest);
      break;
    case 3:
      fuzz_response(rest);
      break;
    case 4:
      fuzz_text(rest);
      break;
    default:
      fuzz_frames(rest);
      break;
  }
  return 0;
}

#ifdef PROCTOR_FUZZ_SEEDS_MAIN

#include "tests/fuzz/seed_main.hpp"

// -- seed corpus --------------------------------------------------------------------------------

namespace {

std::string with_mode(char mode, const std::string& rest) {
  return std::string(1, mode) + rest;
}

std::vector<std::pair<std::string, std::string>> seeds() {
  std::vector<std::pair<std::string, std::string>> out;
  auto request = [&](const char* name, const pb::Request& r) {
    out.emplace_back(std::string("request_") + name, with_mode(0, r.SerializeAsString()));
  };
  auto submit = [&](const char* name, const char* type, const char* args, const char* nonce) {
    pb::Request r;
    r.mutable_submit()->set_type(type);
    r.mutable_submit()->set_args_json(args);
    r.mutable_submit()->set_nonce(nonce);
    request(name, r);
  };
  submit("submit_ledger", "demo.ledger",
         R"({"steps":3,"ledger_dir":"/tmp","fail_at":1,"children":2,"depth":1})", "n-1");
  submit("submit_flaky", "demo.flaky", R"({"crash_times":1,"ledger_dir":"/tmp"})", "");
  submit("submit_wait", "demo.wait_event", R"({"key":"order-42","timeout_ms":"5000"})", "");
  submit("submit_fanout", "demo.fanout", R"({"children":3,"childSteps":2})", "");
  submit("submit_call", "demo.call", R"({"service":"echo","request":"hi","timeoutMs":"100"})", "");
  submit("submit_unknown", "demo.nope", "{}", "");
  pb::Request r;
  r.mutable_status()->set_id(7);
  request("status", r);
  r.mutable_list()->set_state(pb::WAITING);
  r.mutable_list()->set_all(true);
  request("list", r);
  r.mutable_wait()->set_id(7);
  r.mutable_wait()->set_timeout_ms(1000);
  request("wait", r);
  r.mutable_event()->set_key("order-42");
  r.mutable_event()->set_payload_json(R"({"paid":true,"items":[1,2.5e3,"x"],"note":null})");
  request("event", r);
  r.mutable_abort()->set_id(7);
  request("abort", r);
  r.mutable_metrics();
  request("metrics", r);

  auto args = [&](const char* name, char type, const std::string& json) {
    out.emplace_back(std::string("registry_") + name, with_mode(1, std::string(1, type) + json));
  };
  args("ledger", 0, R"({"steps":2,"ledger_dir":"/tmp","stepSleepMs":0})");
  args("noop", 3, R"({"steps":5})");
  args("unknown_field", 0, R"({"ledger_dir":"/tmp","colour":"red"})");
  args("bad_json", 4, R"({"children":[1,)");
  args("raw_type", '\xf0', std::string("demo.wait_event\0{\"key\":\"k\"}", 27));

  auto status = [&](const char* name, const pb::ProcStatus& s) {
    out.emplace_back(std::string("status_") + name, with_mode(2, s.SerializeAsString()));
  };
  pb::ProcStatus s;
  s.set_id(7);
  s.set_type("demo.fanout");
  s.set_state(pb::SUCCESS);
  s.set_root_id(7);
  s.add_children(8);
  s.add_children(9);
  s.set_result_json(R"({"children":2})");
  status("success", s);
  s.set_state(pb::ROLLEDBACK);
  s.set_error("child 8 \"failed\"\n\ttab");
  s.set_result_json("not json {");
  status("rolledback", s);
  s.set_state(pb::WAITING);
  s.set_result_json(" [1, {\"a\": [true, false, null]}, -0.5e-3] ");
  s.set_waiting_for("event order-42");
  status("waiting", s);

  pb::Response resp;
  resp.set_code(pb::Response::OK);
  *resp.add_list() = s;
  s.set_id(8);
  s.set_result_json("");
  *resp.add_list() = s;
  *resp.mutable_status() = s;
  out.emplace_back("response_list", with_mode(3, resp.SerializeAsString()));

  auto text = [&](const char* name, const std::string& t) {
    out.emplace_back(std::string("text_") + name, with_mode(4, t));
  };
  text("object", R"({"a":[1,-2.5E+3,"\u00e9\n",{"b":null}],"c":true})");
  text("invalid", "{'a': 1,}");
  text("utf8", "\"caf\xc3\xa9 \xf0\x9f\x98\x80 \xed\xa0\x80 \xc0\xaf\"");

  pb::Request st;
  st.mutable_status()->set_id(7);
  auto frames = make_frame(st.SerializeAsString()) + make_frame("xy") + make_frame("");
  out.emplace_back("frames_split", with_mode(5, std::string("\x40\x03", 2) + frames));
  out.emplace_back("frames_empty_ok", with_mode(5, std::string("\xc0\x00", 2) + frames));
  out.emplace_back("frames_small_limit", with_mode(5, std::string("\x03\x05", 2) + frames));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  return proctor::fuzz::write_seeds(argc, argv, "wire_message_fuzzer", seeds());
}
#endif
