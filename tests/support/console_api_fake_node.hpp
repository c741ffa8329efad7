// Test support for the console API's unit tests (console_api_test.cpp, api_changes_test.cpp):
// a node that answers from a function and remembers what it was asked, and the request the
// HTTP server would hand the API.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/console/console_api.hpp"

namespace proctor::testing {

/// A node that answers from `answer` (an empty OK by default) and remembers what it was asked.
struct fake_node {
  std::vector<pb::Request> asked;
  std::function<executor_answer(const pb::Request&)> answer = [](const pb::Request&) {
    executor_answer a;
    a.response.emplace();
    return a;
  };
  node_caller caller() {
    return [this](const pb::Request& r) {
      asked.push_back(r);
      return answer(r);
    };
  }
};

inline console_request api_request(const std::string& method, const std::string& path,
                                   std::multimap<std::string, std::string> params,
                                   console_auth auth, std::string body) {
  console_request r;
  r.method = method;
  r.path = path;
  r.params = std::move(params);
  r.auth = auth;
  r.body = std::move(body);
  return r;
}

inline nlohmann::json body(const console_reply& r) {
  return nlohmann::json::parse(r.body);
}

}  // namespace proctor::testing
