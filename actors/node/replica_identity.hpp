// Which data directory each replica of a group runs on (docs/replication.md, "A replica that
// lost its disk"). A replica keeps its Raft term and vote in its data directory: one started
// again on a wiped directory under its old name has forgotten whom it voted for, and could
// vote twice in one term, electing two leaders. So each data directory gets an id when it is
// first used (REPLICA's second line, beside the replica's name); the group's leader records
// each member's id in the replicated store once the member answers (keys.hpp replica_root),
// and a replica that starts with no Raft state first asks the others which id they recorded
// for its name: another one than its own means it lost its state, and it is refused.
// `replicas remove` forgets the member's id, so a replacement started with --join is recorded
// anew.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <proctor/wire.pb.h>

#include "actors/node/replica_group.hpp"
#include "persistence/journal_store.hpp"
#include "tls/tls_options.hpp"

namespace proctor {

/// What data_dir/REPLICA holds: the replica's name, and its data directory's id ("" in a
/// file written before ids were kept).
struct replica_dir_file {
  std::string name;
  std::string dir_id;
};

/// Reads data_dir/REPLICA (both fields "" when there is none).
replica_dir_file read_replica_file(const std::string& data_dir);
/// Writes it (fsync'd, then renamed into place). False with a one-line reason.
bool write_replica_file(const std::string& data_dir, const replica_dir_file& f, std::string* error);
/// A new data directory id: 16 random hex digits.
std::string new_data_dir_id();

/// Member `m`'s answer to `replicas` (its client address; 1 s to connect, 2 s to answer),
/// or nullopt with `*why` set.
std::optional<pb::ReplicasInfo> ask_replicas(const replica_member& m, const tls_options& tls,
                                             std::string* why);

/// A member's data directory as the group recorded it.
struct recorded_dir {
  std::string name;
  std::string dir_id;
  int64_t at_ms = 0;
  std::string http;  ///< its --http HOST:PORT as it last said ("" without --http)
};
/// Every member's recorded id, by Raft id, as `store` holds them (any replica's store: they
/// are replicated). Empty when none are, or the store cannot be read.
std::map<uint64_t, recorded_dir> read_recorded_dirs(journal_store& store);
/// The write that records `d` for the member `raft_id`, and the one that forgets it.
store_op record_dir_op(uint64_t raft_id, const recorded_dir& d);
store_op forget_dir_op(uint64_t raft_id);

/// Before a replica with no Raft state starts: asks each other member of `group` (its client
/// address, `replicas`) which data directory id it recorded for `self`. Returns "" when none
/// recorded another than `dir_id` (or none answered: then it logs that it could not check),
/// else the one-line refusal.
std::string check_not_wiped(const std::vector<replica_member>& group, const replica_member& self,
                            const std::string& node_name, const std::string& dir_id,
                            const tls_options& tls);

/// The leader's recorder: a thread that, every `every`, asks each member of `group()` for its
/// data directory's id (and its --http address, recorded anew when it changes) and records the
/// ones not recorded yet (a different one is logged as
/// an error: a member running on a directory that lost its Raft state), and forgets those of
/// replicas no longer in the group. Stops when destroyed.
class dir_recorder {
public:
  struct setup {
    std::string node_name;
    const replica_member* self = nullptr;
    std::string self_dir_id;
    std::string self_http;  ///< this replica's --http address ("" without)
    std::function<std::vector<replica_member>()> group;
    journal_store* store = nullptr;  ///< the replicated store; outlives the recorder
    tls_options tls;
    std::chrono::milliseconds every{2'000};
  };
  explicit dir_recorder(setup s);
  ~dir_recorder();
  dir_recorder(const dir_recorder&) = delete;
  dir_recorder& operator=(const dir_recorder&) = delete;

private:
  void run();
  void round();
  setup s_;
  std::mutex mtx_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<uint64_t, std::string> reported_;  // mismatches logged, by Raft id: the id seen
  std::thread thread_;
};

}  // namespace proctor
