// Who may change things through the web console: a POST carries the token the node was
// started with (`--http-token`, `--http-token-file`) as "Authorization: Bearer TOKEN".
// Without a configured token the console is read-only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "actors/base/auth_policy.hpp"

namespace proctor {

/// What a request's credentials amount to.
enum class console_auth : uint8_t {
  granted,         ///< the right token
  not_configured,  ///< the node has no token: nothing may be changed (403)
  missing,         ///< no "Authorization: Bearer" header (401)
  wrong,           ///< a token, not the node's (401)
};

/// Checks an Authorization header's value against `token` ("" = none configured). The
/// comparison takes the same time wherever the two first differ.
console_auth check_bearer(std::string_view authorization, const std::string& token);

/// Who an HTTP request is, by its Authorization header: the holder of `node_token`
/// (--http-token: admin, as before), of one of the policy's tokens (its role), or nobody
/// with a token (reader, or nothing at all when `read_token_required`). `*auth` says how the
/// header fared against every token configured (not_configured: there is none).
caller http_caller(std::string_view authorization, const std::string& node_token,
                   const auth_policy* policy, bool read_token_required, console_auth* auth);

/// True if `a` and `b` are equal, in a time that depends only on their lengths.
bool equal_in_constant_time(std::string_view a, std::string_view b);

/// The token of `--http-token` or `--http-token-file` (at most one of them given; the file's
/// trailing whitespace and newlines are not part of it), "" when neither is given, or
/// nullopt and `*error` when the file cannot be read or a token is empty or has spaces.
std::optional<std::string> load_console_token(const std::string& token,
                                              const std::string& token_file, std::string* error);

}  // namespace proctor
