#include "actors/base/authoriser.hpp"

#include <proctor/cluster.pb.h>

#include "actors/base/auth_policy.hpp"

namespace proctor {

namespace {

using R = pb::Request;

role cluster_role(const pb::ClusterRequest& c) {
  switch (c.op()) {
    case pb::ClusterRequest::SHOW:
      return role::reader;
    case pb::ClusterRequest::INIT:
      return role::admin;
    case pb::ClusterRequest::PROPOSE:
      break;
    default:
      return role::admin;  // an operation this node does not know: the executor refuses it
  }
  switch (c.command().command_case()) {
    case pb::ClusterCommand::kActivate:
    case pb::ClusterCommand::kDrain:
    case pb::ClusterCommand::kRemove:
    case pb::ClusterCommand::kForget:
      return role::admin;
    case pb::ClusterCommand::kSetLimit:
    case pb::ClusterCommand::kSetSchedule:
      return role::operator_;
    default:
      return role::node;  // found, join, raise_floor, schedule_progress: a member's own acts
  }
}

role schedule_role(const pb::ScheduleRequest& s) {
  return s.op() == pb::ScheduleRequest::LIST || s.op() == pb::ScheduleRequest::SHOW
           ? role::reader
           : role::operator_;
}

role limits_role(const pb::LimitsRequest& l) {
  const bool change = l.clear() || l.has_max_running() || l.has_rate() || l.has_per_ms();
  return change ? role::operator_ : role::reader;
}

role task_role(const pb::TaskRequest& t) {
  // A worker takes tasks and reports their ends: it feeds procedures, as a submitter does.
  return t.op() == pb::TaskRequest::QUEUES ? role::reader : role::submitter;
}

/// The node a request says it comes from, if it says so ("" if not).
std::string claimed_node(const pb::Request& req) {
  switch (req.body_case()) {
    case R::kPeer:
      return req.peer().from();
    case R::kPing:
      return req.ping().from();
    case R::kNonces:
      return req.nonces().node();
    case R::kCluster: {
      const auto& c = req.cluster().command();
      if (req.cluster().op() != pb::ClusterRequest::PROPOSE)
        return {};
      if (c.has_join())
        return c.join().member().name();
      if (c.has_raise_floor())
        return c.raise_floor().name();
      return {};
    }
    default:
      return {};
  }
}

/// A node's own act (see authoriser.hpp): allowed to the node's certificate whatever its
/// role as a client.
bool node_act(const pb::Request& req) {
  if (req.tag() != 0)
    return true;  // a peer link's: a node's own, or one it forwards for its clients
  switch (req.body_case()) {
    case R::kPeer:
    case R::kNonces:
    case R::kCall:
      return true;
    case R::kPing:
      return !req.ping().from().empty();
    case R::kCluster:
      return req.cluster().forwarded() || cluster_role(req.cluster()) == role::node;
    default:
      return false;
  }
}

/// Whether the executor checks `req` against the type of what it names (stamp_types).
bool checked_by_executor(const pb::Request& req) {
  switch (req.body_case()) {
    case R::kAbort:
    case R::kBypass:
    case R::kRetry:
    case R::kResubmit:
    case R::kRelease:
      return true;
    case R::kSchedule:
      return req.schedule().op() != pb::ScheduleRequest::LIST
             && req.schedule().op() != pb::ScheduleRequest::SHOW
             && req.schedule().op() != pb::ScheduleRequest::ADD;
    default:
      return false;
  }
}

/// For a caller limited to type prefixes: "" if the door may let `req` on (the executor
/// checks what checked_by_executor says), else what it concerns that is not the caller's.
std::string outside_types(const caller& who, const pb::Request& req) {
  auto check = [&](std::string_view type, const char* what) -> std::string {
    return type_allowed(who.types, type)
             ? std::string{}
             : request_kind(req) + " concerns " + what + " '" + std::string{type} + "'";
  };
  switch (req.body_case()) {
    case R::kSubmit:
      return check(req.submit().type(), "type");
    case R::kEvent:
      return check(req.event().key(), "event key");
    case R::kLimits:
      return check(req.limits().type(), "type");
    case R::kSchedule:
      if (req.schedule().op() == pb::ScheduleRequest::ADD)
        return check(req.schedule().spec().type(), "type");
      return {};
    default:
      return checked_by_executor(req) ? std::string{}
                                      : request_kind(req) + " concerns no procedure type";
  }
}

}  // namespace

bool type_allowed(const std::vector<std::string>& prefixes, std::string_view type) {
  if (prefixes.empty())
    return true;
  for (const auto& p : prefixes)
    if (type.substr(0, p.size()) == p)
      return true;
  return false;
}

std::string types_text(const std::string& who, const std::vector<std::string>& prefixes) {
  std::string list;
  for (const auto& p : prefixes)
    list += (list.empty() ? "" : ", ") + p + "*";
  return who + " may act on types " + list + " only";
}

bool stamp_types(pb::Request& req, const caller& who, bool forwarder) {
  if (forwarder)
    return false;
  const bool want = !who.types.empty() && checked_by_executor(req);
  if (!want) {
    if (req.only_types().empty())
      return false;
    req.clear_only_types();
    return true;
  }
  req.clear_only_types();
  for (const auto& p : who.types)
    req.add_only_types(p);
  return true;
}

const char* role_name(role r) {
  switch (r) {
    case role::none:
      return "none";
    case role::reader:
      return "reader";
    case role::submitter:
      return "submitter";
    case role::operator_:
      return "operator";
    case role::admin:
      return "admin";
    case role::node:
      return "node";
  }
  return "none";
}

caller caller::anyone() {
  caller c;
  c.granted = role::node;
  c.node = true;
  return c;
}

caller caller::with_certificate(cert_identity id, const auth_policy* policy) {
  caller c;
  c.authenticated = true;
  c.node = id.is_node();
  if (policy != nullptr) {
    c.granted = policy->role_of(id);
    c.types = policy->types_of(id);
  } else {
    c.granted = c.node ? role::node : role::admin;
  }
  c.id = std::move(id);
  return c;
}

caller caller::with_token(std::string name, role r, std::vector<std::string> types) {
  caller c;
  c.authenticated = !name.empty();
  c.token = std::move(name);
  c.granted = r;
  c.types = std::move(types);
  return c;
}

std::string caller::text() const {
  if (!token.empty())
    return "token " + token;
  if (!authenticated)
    return id.what == cert_identity::kind::anonymous && granted != role::node
             ? "a client without a token"
             : "anyone (no TLS)";
  if (id.what == cert_identity::kind::anonymous)
    return "an anonymous client";
  return id.text();
}

std::string request_kind(const pb::Request& req) {
  const auto* field = R::descriptor()->FindFieldByNumber(static_cast<int>(req.body_case()));
  return field != nullptr ? field->name() : "an empty request";
}

role required_role(const pb::Request& req) {
  switch (req.body_case()) {
    case R::kStatus:
    case R::kList:
    case R::kWait:
    case R::kMetrics:
    case R::kQuarantine:
    case R::kNodes:
    case R::kTree:
    case R::kHistory:
    case R::kLocks:
    case R::kPing:
      return role::reader;
    case R::kSubmit:
    case R::kEvent:
    case R::kCall:  // a procedure's call to a service here: as a submit, it starts work
      return role::submitter;
    case R::kAbort:
    case R::kRelease:
    case R::kBypass:
    case R::kRetry:
    case R::kResubmit:
    case R::kAudit:  // who did what (docs/security.md, "Audit")
      return role::operator_;
    case R::kForget:
    case R::kTlsReload:
    case R::kBackup:  // writes a copy of the journal where it is told, on the node
      return role::admin;
    case R::kReplicas:
      return req.replicas().add().empty() && req.replicas().remove().empty() ? role::reader
                                                                             : role::admin;
    case R::kLimits:
      return limits_role(req.limits());
    case R::kSchedule:
      return schedule_role(req.schedule());
    case R::kCluster:
      return cluster_role(req.cluster());
    case R::kTask:
      return task_role(req.task());
    case R::kPeer:
    case R::kNonces:
      return role::node;
    case R::BODY_NOT_SET:
      return role::none;
  }
  return role::node;  // a kind this table lacks (the test fails first): nodes only
}

std::string authorise(const caller& who, const pb::Request& req) {
  auto need = required_role(req);
  auto has = who.node && node_act(req) ? role::node : who.granted;
  if (need > has)
    return request_kind(req) + " needs the " + role_name(need) + " role; " + who.text() + " has "
           + role_name(has);
  // Type prefixes limit what a submitter or an operator does beyond reading; a node's own
  // acts are the node's.
  if (!who.types.empty() && has != role::node && need > role::reader)
    if (auto other = outside_types(who, req); !other.empty())
      return types_text(who.text(), who.types) + "; " + other;
  if (!who.authenticated || !who.token.empty())
    return {};
  auto claimed = claimed_node(req);
  if (claimed.empty() || (who.id.is_node() && who.id.name == claimed))
    return {};
  return request_kind(req) + " says it comes from node " + claimed + " but the certificate is "
         + who.text() + "'s";
}

}  // namespace proctor
