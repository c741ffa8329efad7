// The API's client contract against a fake node (console_api.hpp): submit, event, wait,
// release and /metrics; each malformed body is a 400 naming its field and asks the node
// nothing; each answer is the node's, once it answered.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/console/console_api.hpp"
#include "actors/wire/json/status_json.hpp"
#include "tests/support/console_api_fake_node.hpp"

namespace proctor {
namespace {

using json = nlohmann::json;

using testing::api_request;
using testing::body;
using testing::fake_node;

console_reply call(fake_node& n, const std::string& method, const std::string& path,
                   std::string body = "", std::multimap<std::string, std::string> params = {},
                   const console_api_options& opts = {}) {
  return handle_console_api(
    api_request(method, path, std::move(params), console_auth::granted, std::move(body)),
    n.caller(), 1'764'052'812'345, opts);
}

TEST(http_api, a_submit_sends_the_clis_request_and_answers_the_id) {
  fake_node n;
  n.answer = [](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    a.response->set_id(41);
    return a;
  };
  auto r = call(n, "POST", "/api/procs",
                R"({"type":"demo.ledger","args":{"steps":2,"ledger_dir":"/tmp/x"},)"
                R"("nonce":"order-7","key":"customer-9","priority":-3})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"id":41})");
  ASSERT_EQ(n.asked.size(), 1u);
  const auto& s = n.asked[0].submit();
  EXPECT_EQ(s.type(), "demo.ledger");
  EXPECT_EQ(json::parse(s.args_json()), json::parse(R"({"steps":2,"ledger_dir":"/tmp/x"})"));
  EXPECT_EQ(s.nonce(), "order-7");
  EXPECT_EQ(s.key(), "customer-9");
  EXPECT_FALSE(s.nonce_local());  // a client's nonce is unique in the cluster
  EXPECT_EQ(s.priority(), -3);
  EXPECT_EQ(r.headers.at(0).second, "/api/procs/41");

  call(n, "POST", "/api/procs", R"({"type":"demo.noop","args_json":"{\"a\":1}"})");
  EXPECT_EQ(n.asked.back().submit().args_json(), R"({"a":1})");
  EXPECT_EQ(n.asked.back().submit().nonce(), "");
  call(n, "POST", "/api/procs", R"({"type":"demo.noop"})");
  EXPECT_EQ(n.asked.back().submit().args_json(), "");
}

TEST(http_api, a_malformed_submit_is_a_400_naming_its_field) {
  fake_node n;
  const std::pair<const char*, const char*> cases[] = {
    {"", "type"},
    {"{nope", "body"},
    {"[1,2]", "body"},
    {R"({"args":{}})", "type"},
    {R"({"type":7})", "type"},
    {R"({"type":""})", "type"},
    {R"({"type":"t","args":[1]})", "args"},
    {R"({"type":"t","args":"{}"})", "args"},
    {R"({"type":"t","args":{},"args_json":"{}"})", "args"},
    {R"({"type":"t","args_json":{"a":1}})", "args_json"},
    {R"({"type":"t","args_json":"{oops"})", "args_json"},
    {R"({"type":"t","args_json":"[1]"})", "args_json"},
    {R"({"type":"t","nonce":5})", "nonce"},
    {R"({"type":"t","key":["a"]})", "key"},
    {R"({"type":"t","priority":"high"})", "priority"},
    {R"({"type":"t","priority":1.5})", "priority"},
    {R"({"type":"t","priority":4294967296})", "priority"},
    {R"({"type":"t","arg":{}})", "arg"},
  };
  for (auto [text, field] : cases) {
    auto r = call(n, "POST", "/api/procs", text);
    EXPECT_EQ(r.status, 400) << text;
    auto b = body(r);
    EXPECT_EQ(b["code"], "BAD_REQUEST") << text;
    EXPECT_EQ(b["field"], field) << text << " " << r.body;
    EXPECT_EQ(b["error"].get<std::string>().rfind(std::string(field) + ": ", 0), 0u) << r.body;
  }
  EXPECT_TRUE(n.asked.empty());
}

TEST(http_api, args_past_the_nodes_limit_are_a_413) {
  fake_node n;
  console_api_options o;
  o.max_args_bytes = 100;
  std::string big = R"({"type":"t","args":{"x":")" + std::string(100, 'a') + R"("}})";
  auto r = call(n, "POST", "/api/procs", big, {}, o);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(body(r)["field"], "args");
  auto ev = call(n, "POST", "/api/events",
                 R"({"key":"k","payload":")" + std::string(100, 'b') + R"("})", {}, o);
  EXPECT_EQ(ev.status, 413);
  EXPECT_TRUE(n.asked.empty());
  std::string fits = R"({"type":"t","args":{"x":")" + std::string(80, 'a') + R"("}})";
  EXPECT_EQ(call(n, "POST", "/api/procs", fits, {}, o).status, 200);
}

TEST(http_api, node_refusals_of_a_submit_map_to_statuses) {
  fake_node n;
  pb::Response::Code code = pb::Response::UNKNOWN_TYPE;
  n.answer = [&](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    a.response->set_code(code);
    a.response->set_error("no procedure type 'x'");
    a.response->set_leader("10.0.0.2:7001");
    a.response->set_leader_http("10.0.0.2:8080");
    return a;
  };
  auto r = call(n, "POST", "/api/procs", R"({"type":"x"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(body(r)["code"], "UNKNOWN_TYPE");
  code = pb::Response::REFUSED;
  EXPECT_EQ(call(n, "POST", "/api/procs", R"({"type":"x"})").status, 409);
  code = pb::Response::NOT_LEADER;
  auto nl = call(n, "POST", "/api/procs", R"({"type":"x"})");
  EXPECT_EQ(nl.status, 503);
  EXPECT_EQ(body(nl)["code"], "NOT_LEADER");
  // Issue 46.6: the header names the leader's HTTP address (what an HTTP client can use),
  // its client address apart.
  ASSERT_EQ(nl.headers.size(), 2u);
  EXPECT_EQ(nl.headers[0],
            std::make_pair(std::string("X-Proctor-Leader"), std::string("10.0.0.2:8080")));
  EXPECT_EQ(nl.headers[1],
            std::make_pair(std::string("X-Proctor-Leader-Client"), std::string("10.0.0.2:7001")));
}

TEST(http_api, an_event_carries_its_key_and_payload) {
  fake_node n;
  n.answer = [](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    a.response->set_text("event 'paid' delivered to 1 procedure(s)");
    return a;
  };
  auto r = call(n, "POST", "/api/events", R"({"key":"paid","payload":{"amount":42}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(body(r)["accepted"], true);
  EXPECT_EQ(body(r)["text"], "event 'paid' delivered to 1 procedure(s)");
  EXPECT_EQ(n.asked.back().event().key(), "paid");
  EXPECT_EQ(n.asked.back().event().payload_json(), R"({"amount":42})");
  call(n, "POST", "/api/events", R"({"key":"paid","payload_json":"[1]"})");
  EXPECT_EQ(n.asked.back().event().payload_json(), "[1]");
  call(n, "POST", "/api/events", R"({"key":"paid"})");
  EXPECT_EQ(n.asked.back().event().payload_json(), "");
  auto asked = n.asked.size();
  for (auto [text, field] : {std::pair{"{}", "key"},
                             {R"({"key":3})", "key"},
                             {R"({"key":"k","payload_json":"{x"})", "payload_json"},
                             {R"({"key":"k","payload":1,"payload_json":"1"})", "payload"},
                             {R"({"key":"k","body":1})", "body"}}) {
    auto bad = call(n, "POST", "/api/events", text);
    EXPECT_EQ(bad.status, 400) << text;
    EXPECT_EQ(body(bad)["field"], field) << text;
  }
  EXPECT_EQ(n.asked.size(), asked);
}

TEST(http_api, a_wait_is_bounded_and_says_whether_the_procedure_ended) {
  fake_node n;
  pb::Response::Code code = pb::Response::OK;
  n.answer = [&](const pb::Request& r) {
    executor_answer a;
    a.response.emplace();
    a.response->set_code(code);
    auto* s = a.response->mutable_status();
    s->set_id(r.has_wait() ? r.wait().id() : r.status().id());
    s->set_state(code == pb::Response::OK ? pb::SUCCESS : pb::WAITING);
    return a;
  };
  auto ended = call(n, "GET", "/api/procs/9", "", {{"wait", "30s"}});
  EXPECT_EQ(ended.status, 200);
  EXPECT_EQ(body(ended)["state"], "SUCCESS");
  ASSERT_TRUE(n.asked.back().has_wait());
  EXPECT_EQ(n.asked.back().wait().id(), 9u);
  EXPECT_EQ(n.asked.back().wait().timeout_ms(), 30'000u);

  code = pb::Response::TIMEOUT;
  auto running = call(n, "GET", "/api/procs/9", "", {{"wait", "250ms"}});
  EXPECT_EQ(running.status, 202);
  EXPECT_EQ(body(running)["state"], "WAITING");
  EXPECT_EQ(n.asked.back().wait().timeout_ms(), 250u);

  // Capped, never "forever"; 0 or no wait is a plain status.
  call(n, "GET", "/api/procs/9", "", {{"wait", "2m"}});
  EXPECT_EQ(n.asked.back().wait().timeout_ms(), 60'000u);
  call(n, "GET", "/api/procs/9", "", {{"wait", "45"}});
  EXPECT_EQ(n.asked.back().wait().timeout_ms(), 45'000u);
  call(n, "GET", "/api/procs/9", "", {{"wait", "0"}});
  EXPECT_TRUE(n.asked.back().has_status());

  auto asked = n.asked.size();
  for (auto bad : {"soon", "-1s", "5h", "1.5s", "s"}) {
    auto r = call(n, "GET", "/api/procs/9", "", {{"wait", bad}});
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(body(r)["field"], "wait");
  }
  EXPECT_EQ(n.asked.size(), asked);

  code = pb::Response::NOT_FOUND;
  n.answer = [&](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    a.response->set_code(code);
    return a;
  };
  EXPECT_EQ(call(n, "GET", "/api/procs/9", "", {{"wait", "1s"}}).status, 404);
}

TEST(http_api, waits_past_the_limit_are_a_429) {
  fake_node n;
  std::atomic<int> held{2};
  console_api_options o;
  o.waits = &held;
  o.max_waits = 2;
  auto r = call(n, "GET", "/api/procs/9", "", {{"wait", "1s"}}, o);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(body(r)["code"], "TOO_MANY_WAITS");
  EXPECT_TRUE(n.asked.empty());
  EXPECT_EQ(held.load(), 2);
  held = 1;
  EXPECT_EQ(call(n, "GET", "/api/procs/9", "", {{"wait", "1s"}}, o).status, 200);
  EXPECT_EQ(held.load(), 1);
}

TEST(http_api, release_and_abort_answer_what_the_node_did) {
  fake_node n;
  auto r = call(n, "POST", "/api/procs/12/release");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"id":12,"released":true})");
  EXPECT_EQ(n.asked.back().release().id(), 12u);
  n.answer = [](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    a.response->set_text("abort of procedure 12 accepted: its tree (root 10) rolls back");
    return a;
  };
  auto ab = call(n, "POST", "/api/procs/12/abort");
  EXPECT_EQ(body(ab)["text"], "abort of procedure 12 accepted: its tree (root 10) rolls back");
}

TEST(http_api, a_retry_answers_the_status_and_a_resubmit_the_new_id_with_its_link) {
  fake_node n;
  n.answer = [](const pb::Request& req) {
    executor_answer a;
    a.response.emplace();
    if (req.has_retry()) {
      a.response->mutable_status()->set_id(req.retry().id());
      a.response->mutable_status()->set_state(pb::RUNNABLE);
    } else {
      a.response->set_id(77);
    }
    return a;
  };
  auto r = call(n, "POST", "/api/procs/12/retry");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(body(r)["id"], 12);
  EXPECT_EQ(body(r)["state"], "RUNNABLE");
  EXPECT_EQ(n.asked.back().retry().id(), 12u);
  auto s = call(n, "POST", "/api/procs/12/resubmit");
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(s.body, R"({"id":77,"resubmitted_from":12})");
  EXPECT_EQ(n.asked.back().resubmit().id(), 12u);
  EXPECT_EQ(s.headers.at(0).second, "/api/procs/77");
  // Refusals are the node's, with its words: a 409 (REFUSED), a 404, a 400 for a child.
  pb::Response::Code code = pb::Response::REFUSED;
  n.answer = [&](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    a.response->set_code(code);
    a.response->set_error("procedure 12 already ended SUCCESS");
    return a;
  };
  auto refused = call(n, "POST", "/api/procs/12/retry");
  EXPECT_EQ(refused.status, 409);
  EXPECT_EQ(body(refused)["error"], "procedure 12 already ended SUCCESS");
  code = pb::Response::NOT_FOUND;
  EXPECT_EQ(call(n, "POST", "/api/procs/12/resubmit").status, 404);
  code = pb::Response::BAD_REQUEST;
  EXPECT_EQ(call(n, "POST", "/api/procs/12/resubmit").status, 400);
}

TEST(http_api, metrics_are_the_prometheus_text) {
  fake_node n;
  n.answer = [](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    a.response->set_text("# TYPE proctor_procedures gauge\nproctor_procedures 3\n");
    return a;
  };
  auto r = call(n, "GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "# TYPE proctor_procedures gauge\nproctor_procedures 3\n");
  EXPECT_EQ(r.content_type.rfind("text/plain; version=0.0.4", 0), 0u);
  EXPECT_TRUE(n.asked.back().has_metrics());
  EXPECT_TRUE(is_api_path("/metrics"));
  EXPECT_FALSE(is_api_path("/metrics.js"));
}

TEST(http_api, limits_are_listed_and_changed_with_only_the_fields_given) {
  fake_node n;
  n.answer = [](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    auto* l = a.response->add_limits();
    l->set_type("cloud.vm");
    l->set_max_running(4);
    l->set_rate(20);
    l->set_per_ms(60'000);
    l->set_operator_set(true);
    l->set_set_at_ms(1'764'052'812'000);
    l->set_code_max_running(10);
    l->set_code_per_ms(1000);
    l->set_running(4);
    l->set_waiting(37);
    l->set_throttled(112);
    return a;
  };
  auto r = call(n, "GET", "/api/limits");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(body(r), json::parse(R"([{"type":"cloud.vm","max_running":4,"rate":20,)"
                                 R"("per_ms":60000,"source":"operator","running":4,)"
                                 R"("waiting":37,"throttled":112,"code":{"max_running":10,)"
                                 R"("rate":0,"per_ms":1000},"set_at_ms":1764052812000}])"));
  EXPECT_TRUE(n.asked.back().limits().type().empty());
  r = call(n, "POST", "/api/limits", R"({"type":"cloud.vm","max_running":4})");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto& set = n.asked.back().limits();
  EXPECT_EQ(set.type(), "cloud.vm");
  EXPECT_TRUE(set.has_max_running());
  EXPECT_EQ(set.max_running(), 4u);
  EXPECT_FALSE(set.has_rate()) << "a field not given keeps the value in force";
  EXPECT_FALSE(set.has_per_ms());
  call(n, "POST", "/api/limits", R"({"type":"cloud.vm","rate":0,"per_ms":500})");
  EXPECT_TRUE(n.asked.back().limits().has_rate());
  EXPECT_EQ(n.asked.back().limits().per_ms(), 500u);
  call(n, "POST", "/api/limits", R"({"type":"cloud.vm","clear":true})");
  EXPECT_TRUE(n.asked.back().limits().clear());
  auto asked = n.asked.size();
  for (auto [text, field] : {std::pair{"{}", "type"},
                             {R"({"type":"x","max_running":-1})", "max_running"},
                             {R"({"type":"x","rate":1.5})", "rate"},
                             {R"({"type":"x","per_ms":"1s"})", "per_ms"},
                             {R"({"type":"x","clear":1})", "clear"},
                             {R"({"type":"x","max":1})", "max"}}) {
    auto bad = call(n, "POST", "/api/limits", text);
    EXPECT_EQ(bad.status, 400) << text;
    EXPECT_EQ(body(bad)["field"], field) << text;
  }
  EXPECT_EQ(n.asked.size(), asked);
  // A change needs the token, like every POST.
  auto anon = handle_console_api(api_request("POST", "/api/limits", {}, console_auth::missing,
                                             R"({"type":"cloud.vm","clear":true})"),
                                 n.caller(), 0, {});
  EXPECT_EQ(anon.status, 401) << anon.body;
  EXPECT_EQ(n.asked.size(), asked);
}

TEST(http_api, a_node_is_forgotten_only_when_the_loss_is_confirmed) {
  fake_node n;
  n.answer = [](const pb::Request& req) {
    executor_answer a;
    a.response.emplace();
    if (req.forget().name() == "up") {
      a.response->set_code(pb::Response::REFUSED);
      a.response->set_error("node up is up (it answers its heartbeats at 127.0.0.1:7001)");
      return a;
    }
    a.response->set_text("node b forgotten (incarnation 6f3c0a9d1e2b4c5d): 2 procedure(s) ...");
    return a;
  };
  auto r = call(n, "POST", "/api/nodes/forget", R"({"name":"b","confirm_lost":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(body(r)["node"], "b");
  EXPECT_EQ(body(r)["forgotten"], true);
  EXPECT_EQ(n.asked.back().forget().name(), "b");
  EXPECT_TRUE(n.asked.back().forget().confirm());
  auto refused = call(n, "POST", "/api/nodes/forget", R"({"name":"up","confirm_lost":true})");
  EXPECT_EQ(refused.status, 409) << refused.body;
  auto asked = n.asked.size();
  for (auto [text, field] : {std::pair{R"({"confirm_lost":true})", "name"},
                             {R"({"name":"b"})", "confirm_lost"},
                             {R"({"name":"b","confirm_lost":false})", "confirm_lost"},
                             {R"({"name":"b","confirm_lost":true,"force":1})", "force"}}) {
    auto bad = call(n, "POST", "/api/nodes/forget", text);
    EXPECT_EQ(bad.status, 400) << text;
    EXPECT_EQ(body(bad)["field"], field) << text;
  }
  EXPECT_EQ(n.asked.size(), asked) << "nothing unconfirmed reaches the node";
}

}  // namespace
}  // namespace proctor
