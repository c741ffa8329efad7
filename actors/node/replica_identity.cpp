#include "actors/node/replica_identity.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/wire/wire_client.hpp"
#include "persistence/keys.hpp"

namespace proctor {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

}  // namespace

std::optional<pb::ReplicasInfo> ask_replicas(const replica_member& m, const tls_options& tls,
                                             std::string* why) {
  pb::Request req;
  req.mutable_replicas();
  wire_call_options o;
  o.connect_timeout = std::chrono::milliseconds{1'000};
  o.reply_timeout = std::chrono::milliseconds{2'000};
  o.tls = tls;
  auto r = wire_call(m.client.host, m.client.port, req.SerializeAsString(), o);
  if (!r.ok()) {
    *why = r.reason;
    return std::nullopt;
  }
  pb::Response resp;
  if (!resp.ParseFromString(r.reply) || resp.code() != pb::Response::OK || !resp.has_replicas()) {
    *why = "no answer to `replicas`" + (resp.error().empty() ? "" : ": " + resp.error());
    return std::nullopt;
  }
  return resp.replicas();
}

replica_dir_file read_replica_file(const std::string& data_dir) {
  replica_dir_file f;
  std::ifstream in(data_dir + "/REPLICA");
  std::getline(in, f.name);
  std::getline(in, f.dir_id);
  return f;
}

bool write_replica_file(const std::string& data_dir, const replica_dir_file& f,
                        std::string* error) {
  const auto path = data_dir + "/REPLICA";
  const auto tmp = path + ".tmp";
  const auto text = f.name + "\n" + f.dir_id + "\n";
  int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size())
            && ::fsync(fd) == 0;
  int err = errno;
  if (fd >= 0)
    ::close(fd);
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok)
    *error = "cannot write " + path + ": " + std::strerror(err);
  return ok;
}

std::string new_data_dir_id() {
  std::random_device rd;
  uint64_t v = (uint64_t{rd()} << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::map<uint64_t, recorded_dir> read_recorded_dirs(journal_store& store) {
  std::map<uint64_t, recorded_dir> out;
  std::vector<stored_record> recs;
  if (!store.read_tree(journal_keys::replica_root, &recs).ok())
    return out;
  for (const auto& r : recs) {
    std::istringstream in(r.value);
    recorded_dir d;
    std::string at;
    std::getline(in, d.name);
    std::getline(in, d.dir_id);
    std::getline(in, at);
    std::getline(in, d.http);  // (absent in records written before it was kept)
    d.at_ms = std::strtoll(at.c_str(), nullptr, 10);
    if (!d.dir_id.empty())
      out[r.lsn] = std::move(d);
  }
  return out;
}

store_op record_dir_op(uint64_t raft_id, const recorded_dir& d) {
  store_op op;
  op.what = store_op::kind::put;
  op.root_id = journal_keys::replica_root;
  op.lsn = raft_id;
  op.value = d.name + "\n" + d.dir_id + "\n" + std::to_string(d.at_ms) + "\n" + d.http + "\n";
  return op;
}

store_op forget_dir_op(uint64_t raft_id) {
  store_op op;
  op.what = store_op::kind::delete_range;
  op.root_id = journal_keys::replica_root;
  op.from_lsn = raft_id;
  op.lsn = raft_id + 1;
  return op;
}

std::string check_not_wiped(const std::vector<replica_member>& group, const replica_member& self,
                            const std::string& node_name, const std::string& dir_id,
                            const tls_options& tls) {
  size_t asked = 0;
  // The answers, the leader's alone when it answered: it applied a `replicas remove` (and the
  // forgetting of the removed replica's directory) before answering it, while a follower may
  // not have applied it yet, and refuse a replacement started at once (issue 47.6).
  std::vector<std::pair<const replica_member*, pb::ReplicasInfo>> answers;
  for (const auto& m : group) {
    if (m.raft_id == self.raft_id)
      continue;
    ++asked;
    std::string why;
    auto info = ask_replicas(m, tls, &why);
    if (!info) {
      spdlog::info("replica {} of node {}: replica {} at {} did not say which data directory it "
                   "knows this one by ({})",
                   self.name, node_name, m.name, client_address(m), why);
      continue;
    }
    bool leads = false;
    for (const auto& r : info->replicas())
      leads = leads || (r.self() && r.role().rfind("leader", 0) == 0);
    if (leads) {
      answers.clear();
      answers.emplace_back(&m, std::move(*info));
      break;
    }
    answers.emplace_back(&m, std::move(*info));
  }
  const size_t answered = answers.size();
  for (const auto& [member, info] : answers) {
    const auto& m = *member;
    for (const auto& r : info.replicas()) {
      if (r.name() != self.name || r.recorded_data_dir_id().empty()
          || r.recorded_data_dir_id() == dir_id)
        continue;
      return "replica " + self.name + " of node " + node_name
             + " has no Raft state here, but its group knows it by another data directory (id "
             + r.recorded_data_dir_id() + ", as replica " + m.name
             + " says): this one lost its term and vote, and could vote twice in a term. "
               "Remove it (`proctor replicas remove "
             + self.name
             + "`), then start it with --join and add it again (`proctor replicas add`); see "
               "docs/replication.md";
    }
  }
  if (asked > 0 && answered == 0)
    spdlog::warn("replica {} of node {} starts with no Raft state and no other replica answered: "
                 "it could not check that the group does not know it by another data directory",
                 self.name, node_name);
  return "";
}

dir_recorder::dir_recorder(setup s) : s_(std::move(s)) {
  thread_ = std::thread([this] { run(); });
}

dir_recorder::~dir_recorder() {
  {
    std::lock_guard<std::mutex> g(mtx_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void dir_recorder::run() {
  std::unique_lock<std::mutex> g(mtx_);
  while (!stop_) {
    g.unlock();
    round();
    g.lock();
    cv_.wait_for(g, s_.every, [this] { return stop_; });
  }
}

void dir_recorder::round() {
  auto recorded = read_recorded_dirs(*s_.store);
  const auto group = s_.group();
  // A member no longer in the group (removed, or left out by --recover-group) is forgotten:
  // a new replica under its name, on a new directory, is recorded anew.
  for (const auto& [raft_id, d] : recorded)
    if (find_replica(group, raft_id) == nullptr && s_.store->write({forget_dir_op(raft_id)}).ok())
      spdlog::info("node {}: forgot the data directory of {}, no longer a replica", s_.node_name,
                   d.name);
  for (const auto& m : group) {
    {
      std::lock_guard<std::mutex> g(mtx_);
      if (stop_)
        return;
    }
    std::string id;
    std::string http;
    if (m.raft_id == s_.self->raft_id) {
      id = s_.self_dir_id;
      http = s_.self_http;
    } else {
      std::string why;
      auto info = ask_replicas(m, s_.tls, &why);
      if (!info)
        continue;  // asked again next round
      for (const auto& r : info->replicas())
        if (r.self()) {
          id = r.data_dir_id();
          http = r.http_address();
        }
    }
    if (id.empty())
      continue;
    auto i = recorded.find(m.raft_id);
    if (i == recorded.end()) {
      auto st = s_.store->write({record_dir_op(m.raft_id, {m.name, id, now_ms(), http})});
      if (st.ok())
        spdlog::info("node {}: recorded replica {}'s data directory (id {})", s_.node_name, m.name,
                     id);
      continue;
    }
    if (i->second.dir_id == id && i->second.http != http) {
      // Its --http address changed (or was not recorded yet): HTTP clients of the followers
      // are pointed at the leader's as recorded here.
      auto d = i->second;
      d.http = http;
      if (s_.store->write({record_dir_op(m.raft_id, d)}).ok())
        spdlog::info("node {}: recorded replica {}'s HTTP address ({})", s_.node_name, m.name,
                     http.empty() ? "none" : http);
      continue;
    }
    if (i->second.dir_id != id && reported_[m.raft_id] != id) {
      reported_[m.raft_id] = id;
      spdlog::error("node {}: replica {} runs on another data directory (id {}) than the one "
                    "recorded for it (id {}): it lost its Raft state and must not vote; remove "
                    "it and add it again (docs/replication.md)",
                    s_.node_name, m.name, id, i->second.dir_id);
    }
  }
}

}  // namespace proctor
