// Who may do what on a node, and with which certificate (docs/security.md): the checks
// run_node makes of its security options before the node starts, and the reloads a SIGHUP
// makes while it runs.
#pragma once

#include <functional>
#include <string>

#include "actors/base/auth_policy.hpp"
#include "actors/node/node_flags.hpp"
#include "tls/tls_in_use.hpp"

namespace proctor {

/// Before the node starts: its own certificate names it (its peers take it for the node the
/// certificate names), --metrics-tls has what it needs, and the policy file loads into
/// `*policy` (it needs TLS). "" or one line for the refusal to start.
std::string start_security(const node_flags& f, auth_policy_slot* policy);

/// "" when --http-read-token-required has a token to read with (`console_token`, or the
/// policy's); else one line for the refusal to start.
std::string check_read_token(const node_flags& f, const std::string& console_token,
                             const auth_policy_slot& policy);

/// SIGHUP and `proctor tls reload` (`by` names which, in the log): the TLS files read again
/// (new connections use them, those open run on; files that do not do, checked by
/// `own_identity` too, are refused and the old ones stay), then the policy file (one that
/// does not do is refused, the policy in force stays). "" when all was taken (`*done` says
/// what), else why not, one line. Not thread-safe: one caller at a time.
std::string reload_security(const char* by, tls_in_use* files,
                            const std::function<std::string(const tls_options&)>& own_identity,
                            const std::string& policy_path, auth_policy_slot& policy,
                            std::string* done);

}  // namespace proctor
