// How the executor answers: a reply's encoding, an error, and a procedure's status as the
// client protocol shows it (with what it waits for and its resubmission links). Declared in
// internal/executor_state.hpp.
#include <string>

#include <proctor/wire.pb.h>

#include "actors/executor/internal/executor_state.hpp"
#include "actors/procedure/tree_status.hpp"

namespace proctor::exec_detail {

std::string encode(const pb::Response& r) {
  return r.SerializeAsString();
}

std::string error_reply(pb::Response::Code code, std::string msg) {
  pb::Response r;
  r.set_code(code);
  r.set_error(std::move(msg));
  return encode(r);
}

void fill_status(const proc_record& u, pb::ProcStatus* s) {
  s->set_id(u.id);
  s->set_type(u.type());
  s->set_state(to_pb(u.state));
  s->set_root_id(u.root_id);
  s->set_parent_id(u.parent_id);
  for (auto c : u.children())
    s->add_children(c);
  // An empty string is what an unset field reads and writes as; setting one allocates a
  // string all the same (protobuf 3.21): every wait's answer paid for three or four.
  if (!u.error().empty())
    s->set_error(u.error());
  if (!u.result_json().empty())
    s->set_result_json(u.result_json());
  if (!u.waiting_for.empty())
    s->set_waiting_for(u.waiting_for);
  if (!u.node().empty())
    s->set_node(u.node());
  s->set_started_at_ms(u.started_at_ms);
  s->set_since_ms(u.since_ms);
  s->set_ended_at_ms(u.ended_at_ms);
  s->set_bypassed(u.bypassed);
}

void reply(promise_t& rp, std::string bytes) {
  rp.deliver(std::move(bytes));
}

std::string status_reply(const proc_record& u, pb::Response::Code code) {
  pb::Response r;
  r.set_code(code);
  fill_status(u, r.mutable_status());
  return encode(r);
}

void fill_links(executor_actor* self, pb::ProcStatus* s) {
  auto& st = self->state;
  if (auto i = st.resubmitted_from.find(s->id()); i != st.resubmitted_from.end())
    s->set_resubmitted_from(i->second);
  if (auto i = st.resubmitted_as.find(s->id()); i != st.resubmitted_as.end())
    s->set_resubmitted_as(i->second);
}

bool failed_for_good(executor_actor* self, const proc_record& p) {
  if (p.state != proc_state::failed || !p.ended)
    return false;
  auto r = self->state.roots.find(p.root_id);
  return r != self->state.roots.end() && !r->second.finished;
}

std::string waits_for_operator(executor_actor* self, const proc_record& u) {
  if (u.parent_id != 0 || !failed_for_good(self, u))
    return {};
  return "procedure " + std::to_string(u.id)
         + " is FAILED past its point of no return: its tree has not ended, it waits for an "
           "operator: `proctor retry "
         + std::to_string(u.id) + "` runs it forward again, `proctor bypass " + std::to_string(u.id)
         + "` ends it as it stands";
}

void fill_status(executor_actor* self, const proc_record& u, pb::ProcStatus* s) {
  fill_status(u, s);
  if (u.state != proc_state::failed || !u.waiting_for.empty() || u.parent_id != 0)
    return;
  if (!u.ended)
    s->set_waiting_for("rollback (its tree's committed steps are undone in reverse order)");
  else if (!waits_for_operator(self, u).empty())
    s->set_waiting_for("operator (failed past its point of no return: retry or bypass)");
}

std::string status_reply(executor_actor* self, const proc_record& u) {
  pb::Response r;
  fill_status(self, u, r.mutable_status());
  fill_links(self, r.mutable_status());
  return encode(r);
}

}  // namespace proctor::exec_detail
