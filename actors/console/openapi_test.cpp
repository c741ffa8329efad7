// The OpenAPI document (docs/openapi.json) as the node serves it, against the router: every
// route the API answers is in it with its method, and every operation it lists is answered
// (not 404 or 405). (tests/process/openapi_validate.sh checks it with a real validator.)
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/console/console_api.hpp"

namespace proctor {
namespace {

using json = nlohmann::json;
using route_key = std::pair<std::string, std::string>;  // METHOD, path

console_reply call(const std::string& method, const std::string& path) {
  console_request r;
  r.method = method;
  r.path = path;
  r.auth = console_auth::granted;
  return handle_console_api(
    r,
    [](const pb::Request&) {
      executor_answer a;
      a.response.emplace();
      return a;
    },
    0);
}

json served_document() {
  auto r = call("GET", "/api/openapi.json");
  EXPECT_EQ(r.status, 200);
  return json::parse(r.body);
}

std::set<route_key> documented(const json& doc) {
  std::set<route_key> out;
  for (const auto& [path, item] : doc.at("paths").items())
    for (const auto& [method, op] : item.items()) {
      if (method == "parameters")
        continue;
      std::string m = method;
      for (auto& ch : m)
        ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      out.emplace(m, path);
    }
  return out;
}

std::string concrete(std::string path) {
  auto at = path.find("{id}");
  if (at != std::string::npos)
    path.replace(at, 4, "5");
  return path;
}

TEST(openapi, the_document_lists_exactly_the_routes_the_router_answers) {
  auto doc = served_document();
  EXPECT_EQ(doc.at("openapi").get<std::string>().rfind("3.", 0), 0u);
  std::set<route_key> routed;
  for (const auto& r : console_routes())
    routed.emplace(r.method, r.path);
  auto listed = documented(doc);
  for (const auto& r : routed)
    EXPECT_TRUE(listed.count(r)) << r.first << " " << r.second << " is answered, not documented";
  for (const auto& r : listed)
    EXPECT_TRUE(routed.count(r)) << r.first << " " << r.second << " is documented, not routed";
}

TEST(openapi, each_documented_operation_is_answered_and_others_are_not) {
  auto listed = documented(served_document());
  for (const auto& [method, path] : listed) {
    auto r = call(method, concrete(path));
    EXPECT_NE(r.status, 404) << method << " " << path << ": " << r.body;
    EXPECT_NE(r.status, 405) << method << " " << path << ": " << r.body;
    for (const char* other : {"GET", "POST", "PUT", "DELETE", "PATCH"}) {
      if (!listed.count({other, path})) {
        EXPECT_EQ(call(other, concrete(path)).status, 405) << other << " " << path;
      }
    }
  }
}

TEST(openapi, changes_and_only_changes_ask_for_the_token) {
  auto doc = served_document();
  for (const auto& r : console_routes()) {
    std::string m = r.method;
    for (auto& ch : m)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const auto& op = doc.at("paths").at(r.path).at(m);
    EXPECT_EQ(op.contains("security"), r.changes) << r.method << " " << r.path;
    if (r.path.find("{id}") != std::string::npos) {
      EXPECT_TRUE(op.contains("parameters")) << r.path;
    }
    EXPECT_TRUE(op.at("responses").contains("200")) << r.method << " " << r.path;
  }
}

}  // namespace
}  // namespace proctor
