// Internal: the acts this node audited (docs/security.md, "Audit"; executor_audit.cpp owns
// this part). Each is journaled before it is done and again with its outcome; the newest
// are kept here, in the order they were asked, for `proctor audit` and `proctor history`.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <proctor/wire.pb.h>

#include "actors/executor/executor.hpp"
#include "actors/executor/internal/executor_fwd.hpp"
#include "actors/executor/internal/executor_types.hpp"

namespace proctor::exec_detail {

/// An audited act done by the executor after its record is durable (audit_then_act): the
/// request sent to itself, so that its answer can be journaled before the client has it.
using audit_act_atom = caf::atom_constant<caf::atom("auditact")>;

struct audit_part {
  struct item {
    uint64_t lsn = 0;        ///< of its record now (the intent's, then the outcome's)
    uint64_t first_lsn = 0;  ///< of its intent: the order the acts were asked in
    pb::AuditEntry rec;
  };
  std::deque<item> items;  ///< by first_lsn
};

/// At most this many records are kept (the oldest beyond go, whatever their age).
constexpr size_t max_audit_records = 100'000;

/// If `req` is audited (actors/base/audit.hpp) and a door said who sent it: journals its
/// record, then has it done — an audit_act_atom to itself, or with `doer` an (rpc_atom,
/// bytes) to it (audit_outside_atom: a replica group's change, done by its front) —,
/// journals its outcome, and only then answers `rp`. False if it is not audited (nothing
/// done).
bool audit_then_act(executor_actor* self, const pb::Request& req, const std::string& bytes,
                    promise_t& rp, const caf::actor& doer = {});
/// The audit_act_atom's handler: the request done, as handle_request would past its checks.
void act_audited(executor_actor* self, const std::string& bytes, promise_t rp);
/// The records found by recovery (in the first part).
void recover_audit(executor_actor* self, std::vector<recovered_audit>& found);
/// `proctor audit`: Response.audit.
void answer_audit(executor_actor* self, const pb::AuditRequest& req, promise_t& rp);
/// `proctor history`: who asked for acts on procedure `id`, as entries of kind "asked"
/// among the others (by LSN).
void add_audit_history(const executor_actor* self, uint64_t id, pb::History* h);

}  // namespace proctor::exec_detail
