// What a node audits (docs/security.md, "Audit"): every act a client asks that changes what
// the node does — what needs the operator or admin role, and events; submits only when the
// node is told to (--audit-submits) — with who asked, as its door knew it. The door sets a
// request's Actor (set_actor); the executor journals an AuditEntry (audit_entry_of) before
// the act and its outcome after it (actors/executor/executor_audit.cpp).
#pragma once

#include <cstdint>
#include <string>

#include <proctor/wire.pb.h>

#include "actors/base/authoriser.hpp"

namespace proctor {

/// True if the node journals `req` with who asked: an act of the operator or admin role
/// (not a node's own act, not a worker's task report, not a read), an event, and a submit
/// when `submits`.
bool audited(const pb::Request& req, bool submits);

/// The door's part: `req`'s actor is `who` from `address` — unless `forwarder`: the request
/// came from a node that forwards it for its own client (a peer link's tagged request from
/// a node's certificate, or from anyone without TLS), and the actor it carries stays.
/// Returns true if `req` changed (the door sends it on re-encoded). A request the node does
/// not audit loses an actor a client put in it.
bool set_actor(pb::Request& req, const caller& who, const std::string& address, bool submits,
               bool forwarder);

/// The record of `req` asked at `now_ms`: its act ("abort", "limits set"), the procedure
/// it names, its other arguments in one line (payloads given as their size), who asked.
pb::AuditEntry audit_entry_of(const pb::Request& req, int64_t now_ms);

/// An answer's outcome for its audit record: "ok", or "NOT_FOUND: no procedure 7".
std::string audit_outcome(const pb::Response& r);

}  // namespace proctor
