// Test support for the Raft store: a group of replicas in this process on 127.0.0.1, each on
// its own data directory on a disk file system (libraft uses O_DIRECT and kernel AIO, which
// tmpfs lacks), and bounded waits on conditions. Used by raft_store_test and by the TLS
// transport's tests (tests/engine/raft_tls_test.cpp).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "replication/raft_codec.hpp"
#include "replication/raft_store.hpp"

namespace proctor::raft_test {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr long tmpfs_magic = 0x01021994;

inline bool on_tmpfs(const std::string& path) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) == 0 && st.f_type == tmpfs_magic;
}

/// A fresh directory on a disk file system: under the build directory, else /var/tmp.
/// Empty if neither is a disk (the tests then skip: libraft cannot run there).
struct disk_dir {
  std::string path;
  disk_dir() {
    for (std::string base :
         {std::string(PROCTOR_BIN_DIR) + "/../raft_store_test_tmp", std::string("/var/tmp")}) {
      std::error_code ec;
      fs::create_directories(base, ec);
      if (ec || on_tmpfs(base))
        continue;
      std::string tmpl = base + "/raft_XXXXXX";
      if (::mkdtemp(tmpl.data()) == nullptr)
        continue;
      path = tmpl;
      return;
    }
  }
  ~disk_dir() {
    std::error_code ec;
    if (!path.empty())
      fs::remove_all(path, ec);
  }
};

/// A port on 127.0.0.1 that was free a moment ago (the kernel's pick for port 0), and not
/// one this process was given before: the kernel may give the same free port twice in a row,
/// and a group of replicas on one port is refused by libraft ("server address already in
/// use").
inline uint16_t free_port() {
  static std::mutex m;
  static std::set<uint16_t> given;
  std::lock_guard<std::mutex> g(m);
  for (int attempt = 0;; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof(a);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0
        || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("no free port");
    ::close(fd);
    auto port = ntohs(a.sin_port);
    if (given.insert(port).second || attempt >= 100)
      return port;
  }
}

template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit) {
  auto deadline = clock_type::now() + limit;
  while (!pred()) {
    if (clock_type::now() > deadline)
      return false;
    std::this_thread::sleep_for(5ms);  // polling interval of the condition
  }
  return true;
}

inline double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

inline store_op put(uint64_t root, uint64_t lsn, std::string value) {
  return {store_op::kind::put, root, lsn, std::move(value)};
}

inline store_op del(uint64_t root, uint64_t before_lsn, uint64_t from_lsn = 0) {
  return {store_op::kind::delete_range, root, before_lsn, {}, from_lsn};
}

/// Three (or more) replicas of one group in this process.
struct group {
  disk_dir root;
  std::vector<raft_member> members;
  std::vector<std::unique_ptr<raft_store>> stores;  // null: closed
  std::vector<std::vector<bool>> events;            // leadership callbacks, per replica
  std::mutex events_mtx;
  raft_store_options base;
  /// Changes replica i's options from `base` (e.g. another TLS context for one of them).
  std::function<void(size_t, raft_store_options&)> adjust;

  explicit group(size_t n = 3) {
    for (size_t i = 0; i < n; ++i)
      members.push_back({i + 1, "127.0.0.1:" + std::to_string(free_port()), ""});
    stores.resize(n);
    events.resize(n);
  }
  ~group() {
    for (auto& s : stores)
      s.reset();
  }

  raft_store_options options(size_t i) const {
    auto o = base;
    o.id = members[i].id;
    o.address = members[i].address;
    o.members = members;
    o.dir = root.path + "/replica" + std::to_string(i + 1);
    if (adjust)
      adjust(i, o);
    return o;
  }

  bool try_open(size_t i, std::string* err) {
    stores[i] = open_raft_store(options(i), err);
    if (!stores[i])
      return false;
    stores[i]->on_leadership_change([this, i](bool leader) {
      std::lock_guard<std::mutex> g(events_mtx);
      events[i].push_back(leader);
    });
    return true;
  }
  void open(size_t i) {
    std::string err;
    ASSERT_TRUE(try_open(i, &err)) << err;
  }
  void open_all() {
    // A port free_port() picked may be taken by someone else before the replica listens
    // (tests run in parallel): then the group starts over on new ports, in fresh directories.
    std::string err;
    for (int attempt = 0; attempt < 3; ++attempt) {
      bool all = true;
      for (size_t i = 0; all && i < stores.size(); ++i)
        all = try_open(i, &err);
      if (all)
        return;
      ASSERT_NE(err.find("cannot listen"), std::string::npos) << err;
      for (auto& s : stores)
        s.reset();
      {
        std::lock_guard<std::mutex> g(events_mtx);
        for (auto& e : events)
          e.clear();
      }
      std::error_code ec;
      for (size_t i = 0; i < stores.size(); ++i) {
        fs::remove_all(options(i).dir, ec);
        members[i].address = "127.0.0.1:" + std::to_string(free_port());
      }
    }
    FAIL() << "could not open the group: " << err;
  }
  void close(size_t i) { stores[i].reset(); }

  /// The index of the open replica that says it leads, or -1.
  int leader() const {
    for (size_t i = 0; i < stores.size(); ++i)
      if (stores[i] && stores[i]->is_leader())
        return static_cast<int>(i);
    return -1;
  }
  int wait_leader(std::chrono::milliseconds limit = 15s) const {
    int l = -1;
    wait_until([&] { return (l = leader()) >= 0; }, limit);
    return l;
  }
  /// Waits until every open replica applied at least `index`.
  bool wait_applied(uint64_t index, std::chrono::milliseconds limit = 15s) const {
    return wait_until(
      [&] {
        for (auto& s : stores)
          if (s && s->applied_index() < index)
            return false;
        return true;
      },
      limit);
  }
  /// Room for one more replica's leadership events (under the lock the other replicas'
  /// callbacks take: resizing beside them raced, found by ThreadSanitizer).
  void add_events_slot() {
    std::lock_guard<std::mutex> g(events_mtx);
    events.emplace_back();
  }

  std::vector<bool> events_of(size_t i) {
    std::lock_guard<std::mutex> g(events_mtx);
    return events[i];
  }
};

/// One batch of `n` puts to tree `root`, LSNs from `lsn`.
inline std::vector<store_op> batch_of(uint64_t root, uint64_t lsn, size_t n,
                                      size_t value_size = 64) {
  std::vector<store_op> ops;
  for (size_t i = 0; i < n; ++i) {
    std::string v = "r" + std::to_string(root) + "l" + std::to_string(lsn + i) + ":";
    v.resize(value_size, 'x');
    ops.push_back(put(root, lsn + i, std::move(v)));
  }
  return ops;
}

// -- what acknowledged writes left: a model to compare the stores with ------------------------

using record_map = std::map<std::pair<uint64_t, uint64_t>, std::string>;

/// Every record of a store, failing the test on a scan error or a key seen twice.
inline record_map contents(journal_store& s) {
  record_map out;
  size_t seen = 0;
  auto st = s.scan([&](const stored_record& r) {
    ++seen;
    out[{r.root_id, r.lsn}] = r.value;
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(seen, out.size()) << "a key scanned twice";
  return out;
}

/// Applies `ops` to the model of what acknowledged writes left.
inline void model_apply(record_map* m, const std::vector<store_op>& ops) {
  for (const auto& op : ops) {
    if (op.what == store_op::kind::put) {
      (*m)[{op.root_id, op.lsn}] = op.value;
    } else if (op.what == store_op::kind::delete_range) {
      for (auto it = m->begin(); it != m->end();)
        it = it->first.first == op.root_id && it->first.second >= op.from_lsn
                 && (op.lsn == UINT64_MAX || it->first.second < op.lsn)
               ? m->erase(it)
               : std::next(it);
    } else {
      for (auto it = m->begin(); it != m->end();)
        it = it->first.first >= op.root_id && it->first.first <= op.last_root_id ? m->erase(it)
                                                                                 : std::next(it);
    }
  }
}

/// Writes `ops` on `s` and, once acknowledged, applies them to `model`.
inline ::testing::AssertionResult written(journal_store& s, const std::vector<store_op>& ops,
                                          record_map* model) {
  auto st = s.write(ops);
  if (!st.ok())
    return ::testing::AssertionFailure() << st.ToString();
  model_apply(model, ops);
  return ::testing::AssertionSuccess();
}

/// Every open store of `g` holds exactly `model` (the caller waited for them to apply it).
inline void expect_every_store_holds(group& g, const record_map& model) {
  for (size_t i = 0; i < g.stores.size(); ++i) {
    if (g.stores[i]) {
      EXPECT_EQ(contents(*g.stores[i]), model) << "store " << i;
    }
  }
}

/// `ops` encoded as one Raft entry of the journal (raft_codec).
inline std::string entry_of(const std::vector<store_op>& ops) {
  std::string buf(raft_codec::encoded_size(ops), '\0');
  raft_codec::encode_ops(ops, buf.data());
  return buf;
}

#define SKIP_WITHOUT_DISK(g)                                                                       \
  if ((g).root.path.empty()) {                                                                     \
    GTEST_SKIP() << "no disk-backed directory (build dir and /var/tmp are tmpfs): libraft "        \
                    "needs O_DIRECT";                                                              \
  }

}  // namespace proctor::raft_test
