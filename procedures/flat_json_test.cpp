#include "procedures/flat_json.hpp"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/wrappers.pb.h>
#include <gtest/gtest.h>

#include <proctor/demo.pb.h>
#include <proctor/registry.hpp>

#include "tests/support/dynamic_proto.hpp"

namespace proctor {
namespace {

using google::protobuf::Message;

/// A message with a field of every kind, built at run time so that no production .proto
/// carries test-only types. JsonStringToMessage reads it through the pool's own resolver.
constexpr const char* flat_proto = R"pb(
  name: "flat_json_test.proto"
  package: "proctor.test"
  syntax: "proto3"
  message_type {
    name: "Flat"
    field { name: "i32" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 }
    field { name: "i64" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
    field { name: "u32" number: 3 label: LABEL_OPTIONAL type: TYPE_UINT32 }
    field { name: "u64" number: 4 label: LABEL_OPTIONAL type: TYPE_UINT64 }
    field { name: "s32" number: 5 label: LABEL_OPTIONAL type: TYPE_SINT32 }
    field { name: "s64" number: 6 label: LABEL_OPTIONAL type: TYPE_SINT64 }
    field { name: "f32" number: 7 label: LABEL_OPTIONAL type: TYPE_FIXED32 }
    field { name: "f64" number: 8 label: LABEL_OPTIONAL type: TYPE_FIXED64 }
    field { name: "sf32" number: 9 label: LABEL_OPTIONAL type: TYPE_SFIXED32 }
    field { name: "sf64" number: 10 label: LABEL_OPTIONAL type: TYPE_SFIXED64 }
    field { name: "flag" number: 11 label: LABEL_OPTIONAL type: TYPE_BOOL }
    field { name: "text" number: 12 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "long_name" number: 13 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "step_count" number: 14 label: LABEL_OPTIONAL type: TYPE_INT32 }
    field {
      name: "opt_i32" number: 15 label: LABEL_OPTIONAL type: TYPE_INT32
      oneof_index: 1 proto3_optional: true
    }
    field { name: "real" number: 16 label: LABEL_OPTIONAL type: TYPE_DOUBLE }
    field { name: "blob" number: 17 label: LABEL_OPTIONAL type: TYPE_BYTES }
    field { name: "rep" number: 18 label: LABEL_REPEATED type: TYPE_INT32 }
    field {
      name: "nested" number: 19 label: LABEL_OPTIONAL type: TYPE_MESSAGE
      type_name: ".proctor.test.Flat"
    }
    field {
      name: "choice" number: 20 label: LABEL_OPTIONAL type: TYPE_INT32 oneof_index: 0
    }
    field {
      name: "kind" number: 21 label: LABEL_OPTIONAL type: TYPE_ENUM
      type_name: ".proctor.test.Kind"
    }
    field {
      name: "items" number: 22 label: LABEL_REPEATED type: TYPE_MESSAGE
      type_name: ".proctor.test.Flat"
    }
    field {
      name: "tags" number: 23 label: LABEL_REPEATED type: TYPE_MESSAGE
      type_name: ".proctor.test.Flat.TagsEntry"
    }
    nested_type {
      name: "TagsEntry"
      field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
      field {
        name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE
        type_name: ".proctor.test.Flat"
      }
      options { map_entry: true }
    }
    oneof_decl { name: "pick" }
    oneof_decl { name: "_opt_i32" }
  }
  enum_type {
    name: "Kind"
    value { name: "KIND_UNSPECIFIED" number: 0 }
    value { name: "KIND_A" number: 1 }
  }
)pb";

class flat_json_test : public ::testing::Test {
protected:
  void SetUp() override {
    flat_ = schema_.load(flat_proto, "proctor.test.Flat");
    ASSERT_NE(flat_, nullptr);
  }

  static std::string deterministic_bytes(const Message& m) {
    std::string out;
    {
      google::protobuf::io::StringOutputStream os(&out);
      google::protobuf::io::CodedOutputStream cos(&os);
      cos.SetSerializationDeterministic(true);
      m.SerializeToCodedStream(&cos);
    }
    return out;
  }

  /// Parses `json` with the fast path into a message that held data before. Where the fast
  /// path accepts, protobuf must accept too and produce the same bytes; where it refuses,
  /// the message must be cleared. Returns whether the fast path accepted.
  static bool differential(const Message& prototype, const std::string& json) {
    std::unique_ptr<Message> fast(prototype.New());
    std::unique_ptr<Message> slow(prototype.New());
    fast->GetReflection()->MutableUnknownFields(fast.get())->AddVarint(999, 1);
    bool accepted = parse_flat_json(json, fast.get());
    if (!accepted) {
      EXPECT_EQ(fast->ByteSizeLong(), 0u) << "not left cleared: " << json;
      return false;
    }
    google::protobuf::util::JsonParseOptions opts;
    opts.ignore_unknown_fields = false;
    auto st = google::protobuf::util::JsonStringToMessage(json, slow.get(), opts);
    EXPECT_TRUE(st.ok()) << "fast path accepted what protobuf refuses: " << json << " -> "
                         << st.message();
    EXPECT_EQ(deterministic_bytes(*fast), deterministic_bytes(*slow)) << json;
    return accepted;
  }

  test::dynamic_proto schema_;
  const Message* flat_ = nullptr;
};

struct example {
  std::string json;
  bool fast;  ///< whether the fast path is meant to take it
};

TEST_F(flat_json_test, matches_protobuf_on_examples) {
  const std::vector<example> examples = {
    // Accepted: the common forms and their edges.
    {"{}", true},
    {" \t\r\n{ \t\r\n} \t\r\n", true},
    {R"({"i32":5})", true},
    {R"( { "i32" : 5 , "text" : "evt-17" } )", true},
    {"{\n  \"i32\": 5,\n  \"flag\": true\n}\n", true},
    {R"({"i32":0})", true},
    {R"({"i32":2147483647})", true},
    {R"({"i32":-2147483648})", true},
    {R"({"i64":9223372036854775807})", true},
    {R"({"i64":-9223372036854775808})", true},
    {R"({"u32":4294967295})", true},
    {R"({"u64":18446744073709551615})", true},
    {R"({"s32":-7,"s64":-8,"f32":9,"f64":10,"sf32":-11,"sf64":-12})", true},
    {R"({"flag":false,"text":""})", true},
    {R"({"text":"a b/c 'q' ~!@#$%^&*(x) z"})", true},
    {R"({"text":"caf\u00e9"})", false},
    {"{\"text\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbf\"}", true},
    {R"({"longName":"x"})", true},
    {R"({"long_name":"x"})", true},
    {R"({"stepCount":3,"i32":1})", true},
    {R"({"step_count":3})", true},
    {R"({"optI32":0})", true},
    {R"({"opt_i32":-1})", true},
    {R"({"text":"\u0000"})", false},
    // Refused: out of range, other number forms.
    {R"({"i32":2147483648})", false},
    {R"({"i32":-2147483649})", false},
    {R"({"i64":9223372036854775808})", false},
    {R"({"i64":-9223372036854775809})", false},
    {R"({"u32":4294967296})", false},
    {R"({"u32":-1})", false},
    {R"({"u64":18446744073709551616})", false},
    {R"({"u64":-1})", false},
    {R"({"i32":-0})", false},
    {R"({"i32":007})", false},
    {R"({"i32":1.0})", false},
    {R"({"i32":1e2})", false},
    {R"({"i32":"5"})", false},
    {R"({"i32":-})", false},
    {R"({"i32":+1})", false},
    {R"({"i32":null})", false},
    {R"({"i32":true})", false},
    // Refused: strings the fast path does not decode.
    {R"({"text":"a\nb"})", false},
    {R"({"text":"a\"b"})", false},
    {"{\"text\":\"a\tb\"}", false},
    {"{\"text\":\"\xff\"}", false},
    {"{\"text\":\"\xed\xa0\x80\"}", false},
    {"{\"text\":\"\xc0\xaf\"}", false},
    {R"({"text":5})", false},
    {R"({"flag":"true"})", false},
    {R"({"flag":1})", false},
    // Refused: names, structure, other field kinds.
    {R"({"i32":1,"i32":2})", false},
    {R"({"longName":"a","long_name":"b"})", false},
    {R"({"bogus":1})", false},
    {R"({"I32":1})", false},
    {R"({"i\u0033\u0032":1})", false},
    {R"({i32:1})", false},
    {R"({"i32":1,})", false},
    {R"({,})", false},
    {R"({"i32":1} x)", false},
    {R"({"i32":1}{})", false},
    {R"({"i32" 1})", false},
    {R"({"i32":1)", false},
    {"", false},
    {"   ", false},
    {"[]", false},
    {"null", false},
    {"\v{}", false},
    {R"({"real":1})", false},
    {R"({"blob":"YQ=="})", false},
    {R"({"rep":[1]})", false},
    {R"({"nested":{}})", false},
    {R"({"nested":{"i32":1}})", false},
    {R"({"choice":1})", false},
    {R"({"kind":"KIND_A"})", false},
  };
  for (const auto& e : examples)
    EXPECT_EQ(differential(*flat_, e.json), e.fast) << e.json;
}

TEST_F(flat_json_test, matches_protobuf_on_generated_demo_messages) {
  EXPECT_TRUE(differential(pb::NoopData(), R"({"steps":5})"));
  EXPECT_TRUE(differential(pb::WaitEventData(), R"({"key":"evt-17","timeoutMs":250})"));
  EXPECT_TRUE(differential(pb::WaitEventData(), R"({"key":"evt-17","timeout_ms":250})"));
  EXPECT_TRUE(differential(pb::LedgerData(), R"({"steps":0,"ledgerDir":"/tmp/l","failAt":2})"));
  EXPECT_TRUE(differential(pb::CallData(), R"({"service":"h:1/echo","request":"ping"})"));
  pb::NoopData noop;
  ASSERT_TRUE(parse_flat_json(R"({"steps": 5, "step": 2})", &noop));
  EXPECT_EQ(noop.steps(), 5);
  EXPECT_EQ(noop.step(), 2);
  pb::LedgerData ledger;
  ASSERT_TRUE(parse_flat_json(R"({"steps":0})", &ledger));
  EXPECT_TRUE(ledger.has_steps());  // proto3 optional: an explicit 0 is present
}

// simdjson reads past the end of its input: the fast path parses a padded copy, so a text
// cut out of a larger buffer ends where its view ends. Texts past 64 KiB take a parser of
// their own.
TEST_F(flat_json_test, reads_only_the_view_it_is_given) {
  const std::string buffer = R"({"i32":5}{"i32":6})";
  EXPECT_TRUE(differential(*flat_, buffer.substr(0, 9)));
  pb::NoopData noop;
  const std::string steps = R"({"steps":7}xyz)";
  ASSERT_TRUE(parse_flat_json(std::string_view(steps).substr(0, 11), &noop));
  EXPECT_EQ(noop.steps(), 7);
  for (size_t n : {size_t{60'000}, size_t{70'000}}) {
    EXPECT_TRUE(differential(*flat_, R"({"text":")" + std::string(n, 'x') + R"(","i32":1})"));
    EXPECT_FALSE(differential(*flat_, R"({"text":")" + std::string(n, 'x') + R"(\n"})"));
  }
}

TEST_F(flat_json_test, refuses_well_known_types) {
  // Their JSON forms are not objects of their fields: a Duration is "5s", a wrapper a number.
  google::protobuf::Duration duration;
  EXPECT_FALSE(parse_flat_json(R"({"seconds":5})", &duration));
  google::protobuf::UInt32Value wrapper;
  EXPECT_FALSE(parse_flat_json(R"({"value":1})", &wrapper));
}

// Protobuf's parser takes a single value where a list belongs (as a list of one) and
// flattens lists of lists; a submit must refuse both, naming the field.
TEST_F(flat_json_test, a_single_value_where_a_list_belongs_is_refused_naming_the_field) {
  /// A procedure whose data is the run-time Flat message, registered as a type.
  class flat_procedure : public procedure {
  public:
    explicit flat_procedure(const Message& prototype) : data_(prototype.New()) {}
    Message& data() override { return *data_; }
    int32_t initial_state() const override { return 1; }
    outcome execute(int32_t, context&) override { return outcome::done(); }
    void rollback(int32_t, context&) override {}

  private:
    std::unique_ptr<Message> data_;
  };
  registry r;
  r.add(procedure_type{"t.flat",
                       1,
                       [p = flat_] { return std::unique_ptr<procedure>(new flat_procedure(*p)); },
                       {},
                       {}});
  auto refused = [&](const std::string& json) {
    std::string err;
    EXPECT_EQ(r.make_from_json("t.flat", json, &err), nullptr) << json;
    return err;
  };
  auto accepted = [&](const std::string& json) {
    std::string err;
    auto p = r.make_from_json("t.flat", json, &err);
    EXPECT_NE(p, nullptr) << json << ": " << err;
    return p ? p->data().ShortDebugString() : std::string{};
  };
  const std::string why = "malformed args JSON for 't.flat': ";
  EXPECT_EQ(refused(R"({"items":{"i32":1}})"),
            why + "field 'items' takes a list (a JSON array), not an object");
  EXPECT_EQ(refused(R"({"i32":2,"rep":7})"),
            why + "field 'rep' takes a list (a JSON array), not a number");
  EXPECT_EQ(refused(R"({"nested":{"items":{}}})"),
            why + "field 'nested.items' takes a list (a JSON array), not an object");
  EXPECT_EQ(refused(R"({"items":[{"i32":1},{"rep":7}]})"),
            why + "field 'items[1].rep' takes a list (a JSON array), not a number");
  EXPECT_EQ(refused(R"({"nested":{"text":"a","rep":3}})"),
            why + "field 'nested.rep' takes a list (a JSON array), not a number");
  EXPECT_EQ(refused(R"({"items":[[{"i32":1}]]})"),
            why + "field 'items' takes a list of values, not a list of lists (items[0] is a list)");
  EXPECT_EQ(refused(R"({"tags":{"a":{"items":{"i32":1}}}})"),
            why + "field 'tags.a.items' takes a list (a JSON array), not an object");
  // What protobuf refuses itself keeps its own message.
  EXPECT_EQ(refused(R"({"tags":[1]})").rfind(why, 0), 0u);
  // The forms meant are taken.
  EXPECT_EQ(accepted(R"({"items":[{"i32":1},{"rep":[1,2]}]})"),
            "items { i32: 1 } items { rep: 1 rep: 2 }");
  EXPECT_EQ(accepted(R"({"items":null,"rep":[]})"), "");
  EXPECT_EQ(accepted(R"({"tags":{"a":{"i32":3}}})"), "tags { key: \"a\" value { i32: 3 } }");
  EXPECT_EQ(accepted(R"({"i32":4})"), "i32: 4");
}

/// Random flat objects from small alphabets of names, values and separators.
TEST_F(flat_json_test, matches_protobuf_on_random_objects) {
  const std::vector<std::string> names = {
    "i32",     "i64",   "u32",      "u64",       "s32",       "sf64",       "f32",
    "flag",    "text",  "longName", "long_name", "stepCount", "step_count", "optI32",
    "opt_i32", "bogus", "I32",      "real",      "rep",       "choice"};
  const std::vector<std::string> values = {"0",
                                           "-0",
                                           "1",
                                           "-1",
                                           "007",
                                           "42",
                                           "2147483647",
                                           "2147483648",
                                           "-2147483648",
                                           "-2147483649",
                                           "4294967295",
                                           "4294967296",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "-9223372036854775808",
                                           "-9223372036854775809",
                                           "18446744073709551615",
                                           "18446744073709551616",
                                           "1.0",
                                           "1e2",
                                           "true",
                                           "false",
                                           "null",
                                           R"("")",
                                           R"("a b")",
                                           R"("5")",
                                           R"("\n")",
                                           "\"\xc3\xa9\"",
                                           "\"\xff\"",
                                           "[]",
                                           "{}",
                                           "[1]",
                                           R"("evt-17")"};
  const std::vector<std::string> spaces = {"", "", "", " ", "\n\t", "\r", "\f"};
  std::mt19937 rng(20240601);
  auto pick = [&](const std::vector<std::string>& v) -> const std::string& {
    return v[rng() % v.size()];
  };
  int accepted = 0;
  const int rounds = 4000;
  for (int round = 0; round < rounds; ++round) {
    std::string json = pick(spaces) + "{" + pick(spaces);
    auto members = rng() % 5;
    for (uint32_t i = 0; i < members; ++i) {
      if (i > 0)
        json += "," + pick(spaces);
      json +=
        "\"" + pick(names) + "\"" + pick(spaces) + ":" + pick(spaces) + pick(values) + pick(spaces);
    }
    if (rng() % 50 == 0)
      json += ",";
    json += "}" + pick(spaces);
    if (rng() % 50 == 0)
      json += "x";
    if (differential(*flat_, json))
      ++accepted;
  }
  // The fast path must actually take a good share, not refuse everything.
  EXPECT_GT(accepted, rounds / 10);
}

}  // namespace
}  // namespace proctor
