// The web console's API against a fake node: routes, errors and their HTTP statuses, the token, and
// that each answer is the CLI's JSON (actors/wire/json/status_json.hpp,
// actors/wire/json/views_json.hpp).
#include "actors/console/console_api.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/console/console_auth.hpp"
#include "actors/console/console_metrics.hpp"
#include "actors/wire/json/status_json.hpp"
#include "actors/wire/json/views_json.hpp"
#include "tests/support/console_api_fake_node.hpp"

namespace proctor {
namespace {

using json = nlohmann::json;

using testing::api_request;
using testing::body;
using testing::fake_node;

pb::ProcStatus status(uint64_t id, const std::string& type, pb::ProcState state) {
  pb::ProcStatus s;
  s.set_id(id);
  s.set_type(type);
  s.set_state(state);
  s.set_root_id(id);
  return s;
}

console_reply call(fake_node& n, const std::string& method, const std::string& path,
                   std::multimap<std::string, std::string> params = {},
                   console_auth auth = console_auth::granted, std::string body = "") {
  return handle_console_api(api_request(method, path, std::move(params), auth, std::move(body)),
                            n.caller(), 1'764'052'812'345);
}

TEST(console_api, a_list_is_the_cli_list_filtered_by_type_and_state) {
  fake_node n;
  pb::Response resp;
  *resp.add_list() = status(1, "demo.ledger", pb::WAITING);
  *resp.add_list() = status(2, "demo.wait_event", pb::WAITING);
  *resp.add_list() = status(3, "demo.ledger", pb::WAITING);
  n.answer = [&](const pb::Request&) { return executor_answer{resp, ""}; };

  auto all = call(n, "GET", "/api/procs");
  EXPECT_EQ(all.status, 200);
  EXPECT_EQ(all.body, list_to_json(resp.list()));

  auto r =
    call(n, "GET", "/api/procs", {{"state", "waiting"}, {"type", "demo.ledger"}, {"all", "true"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const auto& req = n.asked.back().list();
  EXPECT_EQ(req.state(), pb::WAITING);
  EXPECT_TRUE(req.all());
  EXPECT_FALSE(req.local());
  google::protobuf::RepeatedPtrField<pb::ProcStatus> want;
  *want.Add() = resp.list(0);
  *want.Add() = resp.list(2);
  EXPECT_EQ(r.body, list_to_json(want));
}

TEST(console_api, a_list_newest_first_is_paged_and_says_how_many_in_all) {
  fake_node n;
  pb::Response resp;
  // Ids of two nodes: a higher id is not a newer procedure; a tie in time goes by id.
  for (auto [id, at] : std::vector<std::pair<uint64_t, int64_t>>{
         {1, 1000}, {2, 3000}, {(uint64_t{1} << 48) + 1, 2000}, {3, 3000}, {4, 0}}) {
    *resp.add_list() = status(id, "demo.ledger", pb::WAITING);
    resp.mutable_list()->rbegin()->set_started_at_ms(at);
  }
  n.answer = [&](const pb::Request&) { return executor_answer{resp, ""}; };
  auto ids = [](const console_reply& r) {
    std::vector<uint64_t> out;
    for (const auto& p : body(r))
      out.push_back(p["id"].get<uint64_t>());
    return out;
  };
  const uint64_t other = (uint64_t{1} << 48) + 1;

  auto all = call(n, "GET", "/api/procs", {{"order", "newest"}});
  ASSERT_EQ(all.status, 200) << all.body;
  EXPECT_EQ(ids(all), (std::vector<uint64_t>{3, 2, other, 1, 4}));
  EXPECT_TRUE(all.headers.empty());  // not paged: no total

  auto page = call(n, "GET", "/api/procs", {{"order", "newest"}, {"offset", "1"}, {"limit", "2"}});
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(ids(page), (std::vector<uint64_t>{2, other}));
  ASSERT_EQ(page.headers.size(), 1u);
  EXPECT_EQ(page.headers[0], (std::pair<std::string, std::string>{"X-Proctor-Total", "5"}));

  auto past = call(n, "GET", "/api/procs", {{"offset", "9"}, {"limit", "2"}});
  EXPECT_EQ(past.body, "[]");
  auto by_id = call(n, "GET", "/api/procs", {{"limit", "2"}});
  EXPECT_EQ(ids(by_id), (std::vector<uint64_t>{1, 2}));  // the CLI's order

  const auto asked = n.asked.size();
  EXPECT_EQ(call(n, "GET", "/api/procs", {{"order", "oldest"}}).status, 400);
  EXPECT_EQ(call(n, "GET", "/api/procs", {{"limit", "-1"}}).status, 400);
  EXPECT_EQ(call(n, "GET", "/api/procs", {{"offset", "x"}}).status, 400);
  EXPECT_EQ(n.asked.size(), asked);
}

TEST(console_api, a_bad_filter_is_a_400_naming_the_choices) {
  fake_node n;
  auto r = call(n, "GET", "/api/procs", {{"state", "sleepy"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(body(r)["code"], "BAD_REQUEST");
  EXPECT_NE(body(r)["error"].get<std::string>().find("RUNNABLE"), std::string::npos) << r.body;
  EXPECT_EQ(call(n, "GET", "/api/procs", {{"all", "maybe"}}).status, 400);
  EXPECT_TRUE(n.asked.empty());
}

TEST(console_api, a_cluster_list_missing_a_node_says_so_in_a_header) {
  fake_node n;
  n.answer = [](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    a.response->add_unreachable("node b: timed out\nmore");
    return a;
  };
  auto r = call(n, "GET", "/api/procs");
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "X-Proctor-Unreachable");
  EXPECT_EQ(r.headers[0].second, "node b: timed out");
}

TEST(console_api, status_tree_history_and_locks_are_the_cli_json) {
  fake_node n;
  pb::Response resp;
  *resp.mutable_status() = status(5, "demo.tree", pb::WAITING);
  *resp.add_list() = status(5, "demo.tree", pb::WAITING);
  resp.mutable_list(0)->add_children(6);
  *resp.add_list() = status(6, "demo.ledger", pb::SUCCESS);
  resp.mutable_list(1)->set_parent_id(5);
  resp.mutable_list(1)->set_ended_at_ms(1'764'052'812'000);
  *resp.mutable_history()->mutable_status() = resp.status();
  auto* e = resp.mutable_history()->add_entries();
  e->set_lsn(3);
  e->set_kind("step");
  e->set_at_ms(1'764'052'812'345);
  auto* l = resp.add_locks();
  l->set_resource("ns/t");
  l->set_proc_id(5);
  l->set_held(true);
  n.answer = [&](const pb::Request&) { return executor_answer{resp, ""}; };

  auto s = call(n, "GET", "/api/procs/5");
  EXPECT_EQ(s.body, status_to_json(resp.status()));
  EXPECT_EQ(n.asked.back().status().id(), 5u);
  auto t = call(n, "GET", "/api/trees/5");
  EXPECT_EQ(t.body, tree_to_json(resp.list(), 1'764'052'812'345));
  EXPECT_EQ(body(t)["done"], 1);
  EXPECT_EQ(body(t)["total"], 1);
  EXPECT_EQ(n.asked.back().tree().id(), 5u);
  auto h = call(n, "GET", "/api/procs/5/history");
  EXPECT_EQ(h.body, history_to_json(resp.history()));
  EXPECT_EQ(n.asked.back().history().id(), 5u);
  auto k = call(n, "GET", "/api/locks");
  EXPECT_EQ(k.body, locks_to_json(resp.locks()));
  for (const auto* r : {&s, &t, &h, &k})
    EXPECT_EQ(r->status, 200);
}

TEST(console_api, the_cluster_is_the_cli_json_and_a_node_outside_any_group_says_so) {
  fake_node n;
  bool in_group = true;
  n.answer = [&in_group](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    if (!in_group) {
      a.response->set_code(pb::Response::BAD_REQUEST);
      a.response->set_error("this node takes no part in a cluster group");
      return a;
    }
    auto* ci = a.response->mutable_cluster();
    ci->set_node("a");
    ci->set_role("leader");
    ci->set_leader_node("a");
    ci->mutable_state()->set_cluster_id("0123456789abcdef0123456789abcdef");
    auto* m = ci->mutable_state()->add_members();
    m->set_name("a");
    m->set_state(pb::ACTIVE);
    m->set_incarnation(0x2a);
    return a;
  };
  auto c = call(n, "GET", "/api/cluster");
  EXPECT_EQ(c.status, 200);
  EXPECT_EQ(body(c)["members"][0]["state"], "active");
  EXPECT_EQ(body(c)["members"][0]["incarnation"], "000000000000002a");
  EXPECT_EQ(body(c)["leader"], "a");
  EXPECT_EQ(n.asked.back().cluster().op(), pb::ClusterRequest::SHOW);
  EXPECT_EQ(call(n, "POST", "/api/cluster").status, 405);
  in_group = false;
  auto none = call(n, "GET", "/api/cluster");
  EXPECT_EQ(none.status, 400);
  EXPECT_NE(body(none)["error"].get<std::string>().find("takes no part"), std::string::npos);
}

TEST(console_api, bad_and_unknown_ids_and_routes) {
  fake_node n;
  n.answer = [](const pb::Request& r) {
    executor_answer a;
    a.response.emplace();
    a.response->set_code(pb::Response::NOT_FOUND);
    a.response->set_error("no procedure " + std::to_string(r.status().id()));
    return a;
  };
  for (auto path : {"/api/procs/abc", "/api/procs/0", "/api/procs/-1",
                    "/api/procs/99999999999999999999999", "/api/trees/1x"}) {
    auto r = call(n, "GET", path);
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_NE(body(r)["error"].get<std::string>().find("bad procedure id"), std::string::npos);
  }
  EXPECT_TRUE(n.asked.empty());
  auto r = call(n, "GET", "/api/procs/42");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(body(r)["error"], "no procedure 42");
  EXPECT_EQ(body(r)["code"], "NOT_FOUND");
  EXPECT_EQ(call(n, "GET", "/api/nothing").status, 404);
  EXPECT_EQ(call(n, "GET", "/api/procs/5/whatever").status, 404);
  EXPECT_EQ(call(n, "GET", "/api/trees/5/history").status, 404);
  auto m = call(n, "POST", "/api/locks");
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.headers.at(0).second, "GET");
  EXPECT_EQ(call(n, "GET", "/api/procs/5/abort").status, 405);
  EXPECT_EQ(call(n, "DELETE", "/api/procs/5").status, 405);
}

TEST(console_api, changes_need_the_token) {
  fake_node n;
  auto ro = call(n, "POST", "/api/procs/5/abort", {}, console_auth::not_configured);
  EXPECT_EQ(ro.status, 403);
  EXPECT_EQ(body(ro)["code"], "READ_ONLY");
  auto missing = call(n, "POST", "/api/procs/5/abort", {}, console_auth::missing);
  EXPECT_EQ(missing.status, 401);
  auto wrong = call(n, "POST", "/api/procs/5/bypass", {}, console_auth::wrong);
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(body(wrong)["error"], "wrong token");
  // Refused before the id is even looked at.
  EXPECT_EQ(call(n, "POST", "/api/procs/abc/abort", {}, console_auth::missing).status, 401);
  EXPECT_TRUE(n.asked.empty());

  auto ok = call(n, "POST", "/api/procs/5/abort");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, R"({"id":5,"accepted":true})");
  ASSERT_EQ(n.asked.size(), 1u);
  EXPECT_EQ(n.asked[0].abort().id(), 5u);
}

TEST(console_api, bypass_takes_force_from_the_query_or_the_body) {
  fake_node n;
  n.answer = [](const pb::Request& r) {
    executor_answer a;
    a.response.emplace();
    *a.response->mutable_status() = status(r.bypass().id(), "demo.ledger", pb::SUCCESS);
    a.response->mutable_status()->set_bypassed(true);
    return a;
  };
  auto r = call(n, "POST", "/api/procs/7/bypass");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(body(r)["state"], "SUCCESS");
  EXPECT_FALSE(n.asked.back().bypass().force());
  call(n, "POST", "/api/procs/7/bypass", {{"force", "true"}});
  EXPECT_TRUE(n.asked.back().bypass().force());
  call(n, "POST", "/api/procs/7/bypass", {}, console_auth::granted, R"({"force":true})");
  EXPECT_TRUE(n.asked.back().bypass().force());
  auto n_asked = n.asked.size();
  EXPECT_EQ(call(n, "POST", "/api/procs/7/bypass", {}, console_auth::granted, "{nope").status, 400);
  EXPECT_EQ(call(n, "POST", "/api/procs/7/bypass", {{"force", "yes"}}).status, 400);
  EXPECT_EQ(n.asked.size(), n_asked);
}

TEST(console_api, refusals_and_an_absent_node_map_to_http_statuses) {
  fake_node n;
  pb::Response::Code code = pb::Response::REFUSED;
  n.answer = [&](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    a.response->set_code(code);
    a.response->set_error("procedure 5 is past its point of no return\nsecond line");
    return a;
  };
  auto r = call(n, "POST", "/api/procs/5/abort");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(body(r)["error"], "procedure 5 is past its point of no return");
  EXPECT_EQ(body(r)["code"], "REFUSED");
  code = pb::Response::UNREACHABLE;
  EXPECT_EQ(call(n, "GET", "/api/procs/5").status, 502);
  n.answer = [](const pb::Request&) {
    return executor_answer{std::nullopt, "the node did not answer within 10 ms"};
  };
  auto gone = call(n, "GET", "/api/locks");
  EXPECT_EQ(gone.status, 503);
  EXPECT_EQ(body(gone)["code"], "UNAVAILABLE");
  EXPECT_EQ(body(gone)["error"], "the node did not answer within 10 ms");
}

TEST(console_api, author_text_that_is_not_utf8_still_makes_json) {
  fake_node n;
  n.answer = [](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    a.response->set_code(pb::Response::REFUSED);
    a.response->set_error("bad \xff byte");
    return a;
  };
  auto r = call(n, "POST", "/api/procs/5/abort");
  EXPECT_TRUE(is_valid_json(r.body)) << r.body;
}

TEST(console_api, metrics_are_the_prometheus_text_summed) {
  fake_node n;
  n.answer = [](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    a.response->set_text("# HELP proctor_procedures_failed_total x\n"
                         "proctor_procedures_failed_total{type=\"a\"} 2\n"
                         "proctor_procedures_failed_total{type=\"b {x}\"} 1\n"
                         "proctor_procedures_rolledback_total{type=\"a\"} 3\n"
                         "proctor_waiting_procedures 4\n"
                         "proctor_journal_records_total 120\n"
                         "garbage line\n");
    return a;
  };
  auto r = call(n, "GET", "/api/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(n.asked.back().has_metrics());
  auto j = body(r);
  EXPECT_EQ(j["at_ms"], 1'764'052'812'345);
  EXPECT_EQ(j["steps_total"], 120);
  EXPECT_EQ(j["waiting"], 4);
  EXPECT_EQ(j["failures_total"], 6);
  EXPECT_EQ(j["metrics"]["proctor_procedures_failed_total"], 3);
  EXPECT_FALSE(j["metrics"].contains("garbage"));
}

TEST(console_api, the_console_says_whether_it_is_read_only) {
  fake_node n;
  auto ro = body(call(n, "GET", "/api/console", {}, console_auth::not_configured));
  EXPECT_TRUE(ro["read_only"].get<bool>());
  EXPECT_NE(ro["why"].get<std::string>().find("--http-token"), std::string::npos);
  EXPECT_EQ(ro["states"].size(), 7u);
  auto rw = body(call(n, "GET", "/api/console", {}, console_auth::missing));
  EXPECT_FALSE(rw["read_only"].get<bool>());
}

TEST(console_auth, bearer_tokens) {
  EXPECT_EQ(check_bearer("Bearer s3cret", "s3cret"), console_auth::granted);
  EXPECT_EQ(check_bearer("bearer s3cret", "s3cret"), console_auth::granted);
  EXPECT_EQ(check_bearer("Bearer s3cre", "s3cret"), console_auth::wrong);
  EXPECT_EQ(check_bearer("Bearer s3cret2", "s3cret"), console_auth::wrong);
  EXPECT_EQ(check_bearer("", "s3cret"), console_auth::missing);
  EXPECT_EQ(check_bearer("Basic czNjcmV0", "s3cret"), console_auth::missing);
  EXPECT_EQ(check_bearer("Bearer ", "s3cret"), console_auth::missing);
  EXPECT_EQ(check_bearer("Bearer s3cret", ""), console_auth::not_configured);
  EXPECT_TRUE(equal_in_constant_time("", ""));
  EXPECT_FALSE(equal_in_constant_time("a", ""));
  EXPECT_FALSE(equal_in_constant_time("ab", "ac"));
}

TEST(console_auth, tokens_from_the_command_line_or_a_file) {
  std::string err;
  EXPECT_EQ(load_console_token("", "", &err).value(), "");
  EXPECT_EQ(load_console_token("t0k", "", &err).value(), "t0k");
  EXPECT_FALSE(load_console_token("t0k", "/x", &err));
  EXPECT_NE(err.find("not both"), std::string::npos);
  EXPECT_FALSE(load_console_token("", "/nonexistent/token", &err));
  EXPECT_NE(err.find("cannot read"), std::string::npos);
  EXPECT_FALSE(load_console_token("a b", "", &err));
  char path[] = "/tmp/proctor-token-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "from-file\n\n", 11), 11);
  ::close(fd);
  EXPECT_EQ(load_console_token("", path, &err).value(), "from-file");
  ::unlink(path);
}

}  // namespace
}  // namespace proctor
