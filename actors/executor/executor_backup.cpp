// `proctor backup DIR`: an online backup of the node's journal (persistence/journal_backup.hpp).
// The checkpoint flushes the memtable and links or copies files: it can take a while, so a
// one-shot detached actor makes it and the executor goes on meanwhile.

#include <chrono>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/base/rpc.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/journal_backup.hpp"
#include "persistence/journal_store.hpp"

namespace proctor::exec_detail {

void handle_backup(executor_actor* self, const pb::BackupRequest& req, promise_t rp) {
  auto& st = self->state;
  const std::string dir = req.dir();
  if (dir.empty() || !std::filesystem::path(dir).is_absolute())
    return reply(rp, error_reply(pb::Response::BAD_REQUEST,
                                 "a backup goes to an absolute path on the node's machine that "
                                 "does not exist yet (got '"
                                   + dir + "')"));
  auto store = st.env->store.lock();
  if (!store)
    return reply(rp, error_reply(pb::Response::REFUSED, "this node's journal is not open"));
  backup_info info;
  info.node = st.env->node_name;
  info.incarnation = st.env->incarnation;
  // Read before the checkpoint: every write acknowledged so far is durable, so in it.
  info.lsn = st.env->durable_lsn->load();
  info.taken_at_ms = wall_ms();
  auto next_id = st.env->next_id;
  auto worker = self->spawn<caf::detached>([store, dir, info, next_id](caf::event_based_actor* a) {
    return caf::behavior{[=](rpc_atom) {
      a->quit();
      auto i = info;
      // Ids handed out before the checkpoint are below it (the restore's floor starts here).
      i.next_id = next_id->load();
      auto t0 = std::chrono::steady_clock::now();
      auto s = store->backup(dir, i);
      auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return caf::make_message(s.ok(), s.ok() ? std::to_string(secs) : s.ToString());
    }};
  });
  self->request(worker, caf::infinite, rpc_atom::value)
    .then(
      [rp, dir, info](bool ok, const std::string& text) mutable {
        if (!ok) {
          spdlog::error("backup into {} failed: {}", dir, text);
          return reply(
            rp, error_reply(pb::Response::REFUSED, "backup into " + dir + " failed: " + text));
        }
        spdlog::info("backup of node {} into {} (every record up to LSN {}) in {} s",
                     info.node.empty() ? "(unnamed)" : info.node, dir, info.lsn, text);
        pb::Response r;
        r.set_text("backup of node " + (info.node.empty() ? "(unnamed)" : info.node)
                   + " written to " + dir + ": every write acknowledged before it (LSN "
                   + std::to_string(info.lsn)
                   + " and below); restore it with proctord "
                     "--restore-from "
                   + dir + " (docs/operations.md, \"Backups\")");
        reply(rp, encode(r));
      },
      [rp, dir](caf::error& e) mutable {
        reply(rp, error_reply(pb::Response::REFUSED,
                              "backup into " + dir + " failed: " + caf::to_string(e)));
      });
}

}  // namespace proctor::exec_detail
