// The CLI's status JSON.
#include "actors/wire/json/status_json.hpp"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

namespace proctor {
namespace {

pb::ProcStatus sample() {
  pb::ProcStatus s;
  s.set_id(5);
  s.set_type("demo.ledger");
  s.set_state(pb::SUCCESS);
  s.set_root_id(5);
  s.add_children(6);
  s.add_children(7);
  s.set_result_json(R"({"n":3})");
  return s;
}

/// True if protobuf's parser (lenient) accepts `text` as a JSON value.
bool parses(const std::string& text) {
  google::protobuf::Value v;
  return google::protobuf::util::JsonStringToMessage(text, &v).ok();
}

TEST(status_json, exact_format) {
  EXPECT_EQ(status_to_json(sample()),
            R"({"id":5,"type":"demo.ledger","state":"SUCCESS","root_id":5,"parent_id":0,)"
            R"("children":[6,7],"error":"","result":{"n":3},"waiting_for":""})");
}

TEST(status_json, empty_result_is_null_and_no_children_is_empty_array) {
  pb::ProcStatus s;
  s.set_id(18446744073709551615ull);
  s.set_state(pb::WAITING_TIMEOUT);
  s.set_parent_id(3);
  s.set_waiting_for("event k1");
  EXPECT_EQ(status_to_json(s),
            R"({"id":18446744073709551615,"type":"","state":"WAITING_TIMEOUT","root_id":0,)"
            R"("parent_id":3,"children":[],"error":"","result":null,"waiting_for":"event k1"})");
}

TEST(status_json, every_state_has_its_name) {
  pb::ProcStatus s;
  for (auto [st, name] : {std::pair{pb::INITIALIZING, "INITIALIZING"},
                          {pb::RUNNABLE, "RUNNABLE"},
                          {pb::WAITING, "WAITING"},
                          {pb::WAITING_TIMEOUT, "WAITING_TIMEOUT"},
                          {pb::ROLLEDBACK, "ROLLEDBACK"},
                          {pb::SUCCESS, "SUCCESS"},
                          {pb::FAILED, "FAILED"}}) {
    s.set_state(st);
    EXPECT_NE(status_to_json(s).find(std::string{"\"state\":\""} + name + "\""), std::string::npos)
      << name;
  }
}

TEST(status_json, scalar_and_array_results_are_embedded_raw) {
  auto s = sample();
  for (std::string r :
       {"42", "-1.5e3", R"("text")", "true", "null", "[1,[2,{}]]", R"({ "a" : [ ] })"}) {
    s.set_result_json(r);
    EXPECT_NE(status_to_json(s).find(",\"result\":" + r + ","), std::string::npos) << r;
  }
  s.set_result_json("  {\"a\":1}\n");
  EXPECT_NE(status_to_json(s).find(R"("result":{"a":1},)"), std::string::npos);
}

TEST(status_json, invalid_result_becomes_a_string) {
  auto s = sample();
  // Includes text protobuf's lenient parser accepts but RFC 8259 does not.
  for (std::string r : {"not json", "{a:1}", "{'a':1}", "[1,]", R"({"a":1,})", "01", "1 2",
                        "{\"a\":1", "\"a\tb\""}) {
    s.set_result_json(r);
    auto out = status_to_json(s);
    EXPECT_NE(out.find(",\"result\":" + json_quote(r) + ","), std::string::npos) << r;
    EXPECT_TRUE(is_valid_json(out)) << out;
  }
}

TEST(status_json, strings_are_escaped) {
  EXPECT_EQ(json_quote("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(json_quote("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(json_quote(std::string("\x01\x1f\x7f", 3)), R"("\u0001\u001f\u007f")");
  EXPECT_EQ(json_quote(std::string("nul\0x", 5)), R"("nul\u0000x")");
  EXPECT_EQ(json_quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  // Not UTF-8: a lone continuation byte, an overlong '/', a surrogate, a truncated sequence.
  // Each maximal ill-formed subsequence becomes one U+FFFD (Unicode's recommended practice,
  // which nlohmann follows): the truncated sequence is one, the surrogate three.
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(json_quote("a\x80z"), "\"a" + fffd + "z\"");
  EXPECT_EQ(json_quote("\xc0\xaf"), "\"" + fffd + fffd + "\"");
  EXPECT_EQ(json_quote("\xed\xa0\x80"), "\"" + fffd + fffd + fffd + "\"");
  EXPECT_EQ(json_quote("\xe2\x82"), "\"" + fffd + "\"");
  EXPECT_EQ(json_quote("\xe2\x82z\xf0\x9f\x98"), "\"" + fffd + "z" + fffd + "\"");
}

// A result is embedded verbatim in place of a stand-in (actors/wire/json/json_writer.hpp): neither
// a result nor a string that looks like the stand-in is taken for one.
TEST(status_json, results_that_look_like_the_stand_in_stay_as_they_are) {
  google::protobuf::RepeatedPtrField<pb::ProcStatus> xs;
  const std::string look_alike = R"({"bytes":[],"subtype":1})";
  for (int i = 0; i < 3; ++i) {
    auto s = sample();
    s.set_id(static_cast<uint64_t>(i));
    s.set_result_json(look_alike);
    s.set_error(look_alike);
    *xs.Add() = s;
  }
  auto out = list_to_json(xs);
  EXPECT_TRUE(is_valid_json(out)) << out;
  for (int i = 0; i < 3; ++i) {
    auto one = R"({"id":)" + std::to_string(i) + R"(,"type":"demo.ledger","state":"SUCCESS",)"
               + R"("root_id":5,"parent_id":0,"children":[6,7],)"
               + R"("error":"{\"bytes\":[],\"subtype\":1}","result":)" + look_alike
               + R"(,"waiting_for":""})";
    EXPECT_NE(out.find(one), std::string::npos) << out;
  }
}

TEST(status_json, output_is_valid_json_for_hostile_fields) {
  pb::ProcStatus s;
  s.set_type("we\"ird\\type\n");
  s.set_error(std::string("boom\0\x02\xff", 7));
  s.set_waiting_for("</script>");
  s.set_result_json("\"unterminated");
  auto out = status_to_json(s);
  EXPECT_TRUE(is_valid_json(out)) << out;
  EXPECT_TRUE(parses(out)) << out;
  EXPECT_EQ(out.find('\n'), std::string::npos);
}

TEST(status_json, checker_is_strict) {
  for (std::string ok : {"0", "-0", "1.25", "1e9", "1E+2", "2e-3", R"("\u00e9\/")", "[]", "{}",
                         " [ 1 , 2 ] ", R"({"a":{"b":[null,false,true]}})"})
    EXPECT_TRUE(is_valid_json(ok)) << ok;
  for (std::string bad :
       {"", " ", "+1", ".5", "1.", "1e", "-", "tru", "nul", "[1 2]", "{\"a\"}", "{\"a\":}",
        R"("\x41")", R"("\u12")", "\"\xff\"", "[", "]", "NaN", "Infinity"})
    EXPECT_FALSE(is_valid_json(bad)) << bad;
  EXPECT_FALSE(is_valid_json(std::string(1000, '[') + std::string(1000, ']')));
  EXPECT_TRUE(is_valid_json(std::string(200, '[') + std::string(200, ']')));
  // Within nlohmann's limits too: a byte order mark, a lone surrogate escape and a number
  // past a double's range are refused (a result like that is shown as a string).
  for (std::string bad : {"\xef\xbb\xbf{}", R"("\ud800")", R"("\udc00\ud800")", "1e400", "-1e400"})
    EXPECT_FALSE(is_valid_json(bad)) << bad;
  // nlohmann stops at a NUL byte; is_valid_json does not let it.
  for (std::string bad :
       {std::string("3\0x", 3), std::string("{}\0", 3), std::string("\"a\0\"", 4)})
    EXPECT_FALSE(is_valid_json(bad)) << bad;
  EXPECT_TRUE(is_valid_json(R"("\ud83d\ude00")"));
}

TEST(status_json, list_is_an_array) {
  google::protobuf::RepeatedPtrField<pb::ProcStatus> xs;
  EXPECT_EQ(list_to_json(xs), "[]");
  *xs.Add() = sample();
  auto second = sample();
  second.set_id(6);
  second.set_parent_id(5);
  second.clear_children();
  *xs.Add() = second;
  auto out = list_to_json(xs);
  EXPECT_EQ(out, "[" + status_to_json(sample()) + "," + status_to_json(second) + "]");
  EXPECT_TRUE(is_valid_json(out));
  EXPECT_TRUE(parses(out));
}

TEST(nodes_json, a_replica_groups_entry_carries_its_group) {
  google::protobuf::RepeatedPtrField<pb::NodeStatus> xs;
  auto* plain = xs.Add();
  plain->set_name("a");
  plain->set_up(true);
  auto* b = xs.Add();
  b->set_name("b");
  b->set_up(true);
  auto* g = b->mutable_group();
  g->set_term(4);
  g->set_leader("b2");
  g->set_commit_index(90);
  auto* m = g->add_replicas();
  m->set_name("b1");
  m->set_address("127.0.0.1:7001");
  m->set_role("follower");
  m->set_voter(true);
  m->set_match_index(88);
  m->set_lag(2);
  m->set_reachable(true);
  auto out = nodes_to_json(xs);
  EXPECT_TRUE(parses(out)) << out;
  EXPECT_EQ(out.find("replicas"), out.rfind("replicas")) << out;  // only b has a group
  EXPECT_NE(out.find(R"("replicas":{"term":4,"leader":"b2","commit_index":90,"members":[)"
                     R"({"name":"b1","address":"127.0.0.1:7001","role":"follower","voter":true,)"
                     R"("stored_index":88,"lag":2,"reachable":true}]})"),
            std::string::npos)
    << out;
}

}  // namespace
}  // namespace proctor
