// `proctor resubmit`: a tree that ended ROLLEDBACK runs again under a new id, with its root's
// type, args (its Submitted data) and priority, read back from the tree's journal records or,
// once only its summary is left, from the summary (ProcSummary.args). The new root is
// submitted as `proctor submit` submits (answered once its Submitted record is durable), that
// record naming the old root (resubmitted_from); its nonce, "resubmit:<old id>", makes a
// resubmit sent again (a lost answer, two operators) answer the same new id.
#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "persistence/tree_image.hpp"

namespace proctor::exec_detail {

namespace {

std::string resubmit_nonce(uint64_t id) {
  return "resubmit:" + std::to_string(id);
}

/// Answers the id a resubmit of `old_root` made already.
void answer_new_id(promise_t& rp, uint64_t old_root, uint64_t new_root) {
  pb::Response r;
  r.set_id(new_root);
  r.set_text("procedure " + std::to_string(old_root) + " was resubmitted already as "
             + std::to_string(new_root));
  reply(rp, encode(r));
}

/// Submits the root of `t` again (its tree read back from the journal).
void resubmit_image(executor_actor* self, uint64_t old_root, const tree_image& t, promise_t rp) {
  auto& st = self->state;
  auto refuse = [&rp](pb::Response::Code code, std::string why) {
    reply(rp, error_reply(code, std::move(why)));
  };
  auto me = "procedure " + std::to_string(old_root);
  const auto* p = t.root();
  if (!t.corrupt.empty() || p == nullptr)
    return refuse(pb::Response::REFUSED,
                  me + ": its journal records cannot be read (" + t.corrupt + ")");
  if (p->status != proc_state::rolledback)
    return refuse(pb::Response::REFUSED, me + " is " + std::string(to_string(p->status))
                                           + " in its journal: only a tree that ended "
                                             "ROLLEDBACK can be resubmitted");
  if (!p->args_kept)
    return refuse(pb::Response::REFUSED,
                  me
                    + ": its journal keeps only a summary written before args were kept in "
                      "it, so its args are gone; submit it again by hand");
  const auto* type = st.env->types->find(p->type);
  if (type == nullptr)
    return refuse(pb::Response::UNKNOWN_TYPE,
                  me + " is of type '" + p->type + "', which is not registered on this node");
  std::string err;
  auto inst = st.env->types->make_from_journal(p->type, p->type_version, p->args, &err);
  if (!inst)
    return refuse(pb::Response::REFUSED, me + ": its args cannot be loaded: " + err);
  if (st.procs.size() >= st.cfg.max_procedures)
    return refuse(pb::Response::REFUSED, "node is at capacity (" + std::to_string(st.procs.size())
                                           + " procedures); release finished ones or retry later");
  spdlog::warn("[proc {}] resubmitted by an operator ({}, priority {})", old_root, p->type,
               p->priority);
  submit_root(self, p->type, std::move(inst), resubmit_nonce(old_root), p->priority, old_root,
              std::move(rp), [self, old_root](uint64_t id, uint64_t lsn) {
                ++self->state.resubmits;
                note_resubmit(self, old_root, id, lsn);
                spdlog::warn("[proc {}] resubmitted as procedure {}: its Submitted record is "
                             "durable",
                             old_root, id);
              });
}

}  // namespace

void note_resubmit(executor_actor* self, uint64_t old_root, uint64_t new_root, uint64_t lsn) {
  auto& st = self->state;
  st.resubmitted_as[old_root] = new_root;
  st.resubmitted_from[new_root] = old_root;
  if (lsn != 0)
    st.resubmit_lsn[new_root] = lsn;
}

void handle_resubmit(executor_actor* self, const pb::ResubmitRequest& req, promise_t rp) {
  auto& st = self->state;
  auto refuse = [&rp](pb::Response::Code code, std::string why) {
    reply(rp, error_reply(code, std::move(why)));
  };
  auto id = req.id();
  auto me = "procedure " + std::to_string(id);
  auto i = st.procs.find(id);
  if (i == st.procs.end())
    return refuse(pb::Response::NOT_FOUND,
                  "no procedure " + std::to_string(id)
                    + " (never submitted, or its tree's result was released or expired: "
                      "nothing is kept to resubmit)");
  const auto& p = i->second;
  if (p.parent_id != 0)
    return refuse(pb::Response::BAD_REQUEST,
                  me + " is not a root (its parent is " + std::to_string(p.parent_id)
                    + "): only a whole tree is resubmitted; resubmit its root");
  if (!p.ended || p.state != proc_state::rolledback) {
    auto why = me + " is " + std::string(to_string(p.state))
               + (p.ended ? "" : " (its tree has not ended)")
               + ": only a tree that ended ROLLEDBACK can be resubmitted";
    if (p.state == proc_state::failed && p.ended)
      why += "; retry its failed step with `proctor retry " + std::to_string(id) + "`";
    return refuse(pb::Response::REFUSED, why);
  }
  if (auto a = st.resubmitted_as.find(id); a != st.resubmitted_as.end())
    return answer_new_id(rp, id, a->second);
  auto nonce = resubmit_nonce(id);
  if (auto n = st.nonces.find(nonce); n != st.nonces.end())
    return answer_new_id(rp, id, n->second);
  if (auto n = st.nonce_pending.find(nonce); n != st.nonce_pending.end()) {
    n->second.push_back(rp);  // a resubmit of it is being journaled: the same answer
    return;
  }
  self->request(st.env->journal, std::chrono::seconds{30}, read_tree_atom::value, id)
    .then(
      [self, rp, id](journal_records& recs) mutable {
        auto& st = self->state;
        // Another resubmit of it may have gone ahead while the journal read.
        if (auto a = st.resubmitted_as.find(id); a != st.resubmitted_as.end())
          return answer_new_id(rp, id, a->second);
        if (auto n = st.nonce_pending.find(resubmit_nonce(id)); n != st.nonce_pending.end()) {
          n->second.push_back(rp);
          return;
        }
        if (recs.empty())
          return reply(rp, error_reply(pb::Response::NOT_FOUND,
                                       "procedure " + std::to_string(id)
                                         + ": its tree's records are gone from the journal "
                                           "(released or expired): nothing is kept to "
                                           "resubmit"));
        tree_folder f(id);
        for (const auto& r : recs)
          f.add(r.lsn, r.value);
        resubmit_image(self, id, f.finish(), rp);
      },
      [self, rp](caf::error& e) mutable {
        reply(rp, error_reply(pb::Response::INTERNAL,
                              "journal read failed: " + error_text(self->system(), e)));
      });
}

}  // namespace proctor::exec_detail
