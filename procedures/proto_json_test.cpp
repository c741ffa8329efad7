// Results and the CLI's JSON in one convention (procedures/proto_json.hpp): names as in the
// .proto, 64-bit integers as numbers up to 2^53 and as strings beyond, read back unchanged.
#include "procedures/proto_json.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <proctor/demo.pb.h>
#include <proctor/outcome.hpp>

#include "tests/support/dynamic_proto.hpp"

namespace proctor {
namespace {

using google::protobuf::Message;

constexpr const char* wide_proto = R"pb(
  name: "proto_json_test.proto"
  package: "proctor.test"
  syntax: "proto3"
  dependency: "google/protobuf/duration.proto"
  message_type {
    name: "Wide"
    field { name: "order_id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
    field { name: "paid_cents" number: 2 label: LABEL_OPTIONAL type: TYPE_UINT64 }
    field { name: "small_count" number: 3 label: LABEL_OPTIONAL type: TYPE_INT32 }
    field { name: "ids" number: 4 label: LABEL_REPEATED type: TYPE_SFIXED64 }
    field {
      name: "inner" number: 5 label: LABEL_OPTIONAL type: TYPE_MESSAGE
      type_name: ".proctor.test.Wide"
    }
    field {
      name: "items" number: 6 label: LABEL_REPEATED type: TYPE_MESSAGE
      type_name: ".proctor.test.Wide"
    }
    field {
      name: "totals" number: 7 label: LABEL_REPEATED type: TYPE_MESSAGE
      type_name: ".proctor.test.Wide.TotalsEntry"
    }
    field {
      name: "by_id" number: 8 label: LABEL_REPEATED type: TYPE_MESSAGE
      type_name: ".proctor.test.Wide.ByIdEntry"
    }
    field {
      name: "took" number: 9 label: LABEL_OPTIONAL type: TYPE_MESSAGE
      type_name: ".google.protobuf.Duration"
    }
    field { name: "label_text" number: 10 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "ratio" number: 11 label: LABEL_OPTIONAL type: TYPE_DOUBLE }
    nested_type {
      name: "TotalsEntry"
      field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
      field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
      options { map_entry: true }
    }
    nested_type {
      name: "ByIdEntry"
      field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
      field {
        name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE
        type_name: ".proctor.test.Wide"
      }
      options { map_entry: true }
    }
  }
)pb";

constexpr int64_t two_53 = int64_t{1} << 53;

class proto_json_test : public ::testing::Test {
protected:
  void SetUp() override {
    schema_.import(google::protobuf::Duration::descriptor()->file());
    prototype_ = schema_.load(wide_proto, "proctor.test.Wide");
    ASSERT_NE(prototype_, nullptr);
  }

  std::unique_ptr<Message> parse(const std::string& text) {
    std::unique_ptr<Message> m(prototype_->New());
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, m.get())) << text;
    return m;
  }

  /// Renders `m`, checks that protobuf reads it back into the same message, returns it.
  std::string render(const Message& m, proto_json_options o = {}) {
    auto json = message_to_json(m, o);
    std::unique_ptr<Message> back(prototype_->New());
    auto st = google::protobuf::util::JsonStringToMessage(json, back.get());
    EXPECT_TRUE(st.ok()) << st.message() << " in " << json;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(m, *back)) << json;
    return json;
  }

  test::dynamic_proto schema_;
  const Message* prototype_ = nullptr;
};

TEST_F(proto_json_test, names_are_as_in_the_proto_and_64_bit_integers_are_numbers_in_range) {
  auto m = parse("order_id: 9007199254740992 paid_cents: 1250 small_count: 3 label_text: 'x'");
  EXPECT_EQ(render(*m),
            R"({"order_id":9007199254740992,"paid_cents":1250,"small_count":3,"label_text":"x"})");
}

TEST_F(proto_json_test, integers_a_double_cannot_hold_stay_strings) {
  for (int64_t v : {two_53 + 1, -two_53 - 1, std::numeric_limits<int64_t>::max(),
                    std::numeric_limits<int64_t>::min()}) {
    auto m = parse("order_id: " + std::to_string(v));
    EXPECT_EQ(render(*m), R"({"order_id":")" + std::to_string(v) + R"("})");
  }
  auto neg = parse("order_id: " + std::to_string(-two_53));
  EXPECT_EQ(render(*neg), R"({"order_id":)" + std::to_string(-two_53) + "}");
  auto big = parse("paid_cents: 18446744073709551615");
  EXPECT_EQ(render(*big), R"({"paid_cents":"18446744073709551615"})");
}

TEST_F(proto_json_test, lists_nested_messages_and_map_values_follow_the_same_rule) {
  auto m = parse(R"pb(
    ids: [ 1, -2, 9007199254740993 ]
    inner { order_id: 7 inner { paid_cents: 8 } }
    items { order_id: 9 }
    items { ids: 10 }
    totals { key: "eu" value: 11 }
    totals { key: "us" value: 9007199254740993 }
    by_id { key: 12 value { order_id: 13 } }
  )pb");
  auto json = render(*m);
  EXPECT_NE(json.find(R"("ids":[1,-2,"9007199254740993"])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("inner":{"order_id":7,"inner":{"paid_cents":8}})"), std::string::npos)
    << json;
  EXPECT_NE(json.find(R"("items":[{"order_id":9},{"ids":[10]}])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("totals":{"eu":11,"us":"9007199254740993"})"), std::string::npos) << json;
  // Map keys are JSON strings whatever their type.
  EXPECT_NE(json.find(R"("by_id":{"12":{"order_id":13}})"), std::string::npos) << json;
}

TEST_F(proto_json_test, well_known_types_and_doubles_keep_protobufs_forms) {
  auto m = parse("took { seconds: 1 nanos: 500000000 } ratio: 0.1 order_id: 5");
  EXPECT_EQ(render(*m), R"({"order_id":5,"took":"1.500s","ratio":0.1})");
}

TEST_F(proto_json_test, all_fields_writes_defaults_too) {
  auto m = parse("");
  auto json = render(*m, {.all_fields = true});
  EXPECT_NE(json.find(R"("order_id":0)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("ids":[])"), std::string::npos) << json;
  EXPECT_EQ(render(*m), "{}");
}

TEST_F(proto_json_test, a_result_message_is_written_in_the_convention_and_read_back) {
  pb::FanoutData d;  // child_steps is an int32: camelCase before, snake_case now
  d.set_children(3);
  d.set_child_steps(2);
  auto o = outcome::done(d);
  EXPECT_EQ(o.result_json(), R"({"children":3,"child_steps":2})");
  pb::TimerData w;  // an int64
  w.set_wake_at_ms(1764672000000);
  EXPECT_EQ(outcome::done(w).result_json(), R"({"wake_at_ms":1764672000000})");
}

}  // namespace
}  // namespace proctor
