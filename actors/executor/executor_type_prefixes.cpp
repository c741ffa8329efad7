// Type prefixes at the executor (docs/security.md, "Type prefixes"): a caller its door
// limited to some procedure types (Request.only_types, set by the door from the policy:
// authoriser.hpp, stamp_types) acts by id or name on what only the executor knows the type
// of — a procedure's tree (abort, bypass, retry, resubmit, release), a schedule (pause,
// resume, delete, trigger). Refused here, before it is audited or done: PERMISSION_DENIED,
// logged at a falling rate and counted with the doors' refusals.
#include <spdlog/spdlog.h>

#include "actors/base/authoriser.hpp"
#include "actors/base/errors.hpp"
#include "actors/base/log_rate.hpp"
#include "actors/executor/internal/executor_state.hpp"

namespace proctor::exec_detail {

namespace {

/// The procedure a request checked by id names (0: none).
uint64_t named_procedure(const pb::Request& req) {
  switch (req.body_case()) {
    case pb::Request::kAbort:
      return req.abort().id();
    case pb::Request::kBypass:
      return req.bypass().id();
    case pb::Request::kRetry:
      return req.retry().id();
    case pb::Request::kResubmit:
      return req.resubmit().id();
    case pb::Request::kRelease:
      return req.release().id();
    default:
      return 0;
  }
}

}  // namespace

bool refuse_other_types(executor_actor* self, const pb::Request& req, promise_t& rp) {
  if (req.only_types().empty())
    return false;
  auto& st = self->state;
  const std::vector<std::string> prefixes(req.only_types().begin(), req.only_types().end());
  std::string type, what;
  if (req.has_schedule()) {
    auto s = st.schedules.by_name.find(req.schedule().name());
    if (s == st.schedules.by_name.end() || s->second.rec.deleted())
      return false;  // answered NOT_FOUND as for anyone
    type = s->second.rec.type();
    what = "schedule " + req.schedule().name() + " of type " + type;
  } else if (auto id = named_procedure(req); id != 0) {
    auto p = st.procs.find(id);
    if (p == st.procs.end())
      return false;  // answered NOT_FOUND as for anyone
    // The tree is what is owned: its root's type (the procedure's own when its root runs on
    // another node: a child placed here).
    auto root = st.procs.find(p->second.root_id);
    type = root != st.procs.end() ? root->second.type() : p->second.type();
    what = "procedure " + std::to_string(id) + ", of the tree of type " + type;
  } else {
    return false;  // the door checked it (a submit's type, an event's key, ...)
  }
  if (type_allowed(prefixes, type))
    return false;
  const auto asker = req.actor().who().empty() ? std::string{"the caller"} : req.actor().who();
  auto why = types_text(asker, prefixes) + "; " + request_kind(req) + " concerns " + what;
  auto n = st.env->refused_requests ? ++*st.env->refused_requests : 1;
  if (log_nth(n))
    spdlog::warn("refused a request from {}: {} ({} refused so far; logged at a falling rate)",
                 asker, why, n);
  reply(rp, error_reply(pb::Response::PERMISSION_DENIED, why));
  return true;
}

}  // namespace proctor::exec_detail
