#include "actors/console/console_auth.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace proctor {

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  // Every byte of the longer one is looked at, whatever differs first; volatile keeps the
  // compiler from turning the loop into an early exit.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    auto x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    auto y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

namespace {

/// The token of "Bearer TOKEN" (the scheme in any case, RFC 7235), or "" for none.
std::string_view bearer_of(std::string_view authorization) {
  constexpr std::string_view scheme = "Bearer ";
  if (authorization.size() < scheme.size())
    return {};
  for (size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i]))
        != std::tolower(static_cast<unsigned char>(scheme[i])))
      return {};
  auto given = authorization.substr(scheme.size());
  while (!given.empty() && given.front() == ' ')
    given.remove_prefix(1);
  while (!given.empty() && given.back() == ' ')
    given.remove_suffix(1);
  return given;
}

}  // namespace

console_auth check_bearer(std::string_view authorization, const std::string& token) {
  if (token.empty())
    return console_auth::not_configured;
  auto given = bearer_of(authorization);
  if (given.empty())
    return console_auth::missing;
  return equal_in_constant_time(given, token) ? console_auth::granted : console_auth::wrong;
}

caller http_caller(std::string_view authorization, const std::string& node_token,
                   const auth_policy* policy, bool read_token_required, console_auth* auth) {
  const bool any_token = !node_token.empty() || (policy != nullptr && !policy->tokens.empty());
  auto given = bearer_of(authorization);
  // Nobody with a token: reads, as before, unless reads need a token too.
  auto nobody = caller::with_token("", read_token_required ? role::none : role::reader);
  if (!any_token) {
    *auth = console_auth::not_configured;
    return nobody;
  }
  if (given.empty()) {
    *auth = console_auth::missing;
    return nobody;
  }
  // Both compared whole, whichever matches: the time taken says nothing of which.
  const bool node = !node_token.empty() && equal_in_constant_time(given, node_token);
  const auto* tok = policy != nullptr ? policy->token_of(given) : nullptr;
  if (node) {
    *auth = console_auth::granted;
    return caller::with_token("--http-token", role::admin);
  }
  if (tok != nullptr) {
    *auth = console_auth::granted;
    return caller::with_token(tok->name, tok->granted, tok->types);
  }
  *auth = console_auth::wrong;
  return nobody;
}

std::optional<std::string> load_console_token(const std::string& token,
                                              const std::string& token_file, std::string* error) {
  if (!token.empty() && !token_file.empty()) {
    *error = "give --http-token or --http-token-file, not both";
    return std::nullopt;
  }
  std::string t = token;
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) {
      *error = "cannot read --http-token-file " + token_file;
      return std::nullopt;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    t = ss.str();
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back())))
      t.pop_back();
    if (t.empty()) {
      *error = "--http-token-file " + token_file + " is empty";
      return std::nullopt;
    }
  }
  for (char c : t)
    if (std::isspace(static_cast<unsigned char>(c))
        || std::iscntrl(static_cast<unsigned char>(c))) {
      *error = "the console's token must not contain spaces or control characters";
      return std::nullopt;
    }
  return t;
}

}  // namespace proctor
