#include "actors/node/node_security.hpp"

#include <memory>
#include <utility>

#include <spdlog/spdlog.h>

#include "tls/cert_identity.hpp"

namespace proctor {
namespace {

/// What was read again (`*done`), or why the files were not taken (returned).
std::string reload_tls(const char* by, tls_in_use* files,
                       const std::function<std::string(const tls_options&)>& own_identity,
                       std::string* done) {
  if (files == nullptr)
    return {};
  if (auto why = files->reload(own_identity); !why.empty()) {
    spdlog::error("{}: the TLS files were not taken: {}; the ones in use stay", by, why);
    return "the TLS files were not taken: " + why + "; the ones in use stay";
  }
  std::string id_why;
  auto id = identity_of_file(files->options().cert, &id_why);
  *done = "--tls-cert, --tls-key and --tls-ca read again (" + id.text() + ")";
  spdlog::info("{}: --tls-cert {}, --tls-key {} and --tls-ca {} read again ({}); new "
               "connections use them",
               by, files->given().cert, files->given().key, files->given().ca, id.text());
  return {};
}

std::string reload_policy(const char* by, const std::string& path, auth_policy_slot& slot,
                          std::string* done) {
  if (path.empty()) {
    spdlog::info("{}: no --auth-policy to read again", by);
    return {};
  }
  std::string why;
  auto p = load_auth_policy(path, &why);
  if (!p) {
    spdlog::error("{}: {}; the policy in force stays", by, why);
    return why + "; the policy in force stays";
  }
  auto text = "--auth-policy " + path + " read again: " + std::to_string(p->clients.size())
              + " client(s), " + std::to_string(p->nodes.size()) + " node entr(ies), "
              + std::to_string(p->tokens.size()) + " token(s)";
  spdlog::info("{}: {}", by, text);
  *done += (done->empty() ? "" : "; ") + text;
  slot.current.store(std::make_shared<const auth_policy>(std::move(*p)));
  return {};
}

}  // namespace

std::string start_security(const node_flags& f, auth_policy_slot* policy) {
  if (f.tls.enabled() && !f.name.empty()) {
    if (auto why = check_own_identity(f.tls.cert, f.name, f.replica); !why.empty())
      return why;
  }
  if (f.metrics_tls && (f.metrics_addr.empty() || !f.tls.enabled()))
    return "--metrics-tls needs --metrics and --tls-cert, --tls-key and --tls-ca (the "
           "certificate it serves with, the CA its scrapers' certificates are checked against)";
  if (f.auth_policy.empty())
    return {};
  if (!f.tls.enabled())
    return "--auth-policy needs --tls-cert, --tls-key and --tls-ca: without TLS nobody on the "
           "client port is known, and anyone could do everything (docs/security.md)";
  std::string why;
  auto p = load_auth_policy(f.auth_policy, &why);
  if (!p)
    return why;
  policy->current.store(std::make_shared<const auth_policy>(std::move(*p)));
  return {};
}

std::string check_read_token(const node_flags& f, const std::string& console_token,
                             const auth_policy_slot& policy) {
  if (!f.http_read_token_required)
    return {};
  auto p = policy.current.load();
  if (f.http_addr.empty() || (console_token.empty() && (!p || p->tokens.empty())))
    return "--http-read-token-required needs --http and a token to read with (--http-token, "
           "--http-token-file or [tokens] in --auth-policy)";
  return {};
}

std::string reload_security(const char* by, tls_in_use* files,
                            const std::function<std::string(const tls_options&)>& own_identity,
                            const std::string& policy_path, auth_policy_slot& policy,
                            std::string* done) {
  done->clear();
  auto tls_why = reload_tls(by, files, own_identity, done);
  auto policy_why = reload_policy(by, policy_path, policy, done);
  if (files == nullptr && policy_path.empty())
    return "this node has no TLS files and no --auth-policy to read again";
  if (tls_why.empty())
    return policy_why;
  return policy_why.empty() ? tls_why : tls_why + "; " + policy_why;
}

}  // namespace proctor
