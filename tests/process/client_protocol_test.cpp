// The client protocol (proto/WIRE.md) against a real proctord, from many threads of one
// process (they share a pid, as clients in containers may): every call on a fresh
// connection gets its own answer, none is lost, and the node keeps no memory per client.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/wire.pb.h>

#include "actors/wire/wire_client.hpp"
#include "tests/process/process_harness.hpp"

namespace {

using namespace std::chrono_literals;
using proctor::test::node;
using proctor::test::temp_dir;
namespace pb = proctor::pb;
using clock_type = std::chrono::steady_clock;

constexpr int threads = 8;

/// One call on a fresh connection; the parsed answer, or a failed Response saying why.
pb::Response call(uint16_t port, const pb::Request& req) {
  proctor::wire_call_options o;
  o.reply_timeout = 30s;
  auto r = proctor::wire_call("127.0.0.1", port, req.SerializeAsString(), o);
  pb::Response resp;
  if (!r.ok() || !resp.ParseFromString(r.reply)) {
    resp.Clear();
    resp.set_code(pb::Response::INTERNAL);
    resp.set_error("no answer: " + r.reason);
  }
  return resp;
}

pb::Request submit_req(const std::string& nonce) {
  pb::Request r;
  r.mutable_submit()->set_type("demo.noop");
  r.mutable_submit()->set_args_json(R"({"steps":1})");
  r.mutable_submit()->set_nonce(nonce);
  return r;
}

/// Runs `calls` calls spread over `threads` threads; `one(i)` makes call i and says whether
/// its answer was the right one. Returns the calls per second.
template <class One>
double run_calls(size_t calls, One one) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  auto t0 = clock_type::now();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < calls;)
        one(i);
    });
  for (auto& t : pool)
    t.join();
  return static_cast<double>(calls) / std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// The resident memory of process `pid` in KiB (VmRSS), -1 if unreadable.
long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0)
      return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

size_t env_or(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// 20,000 calls, 8 at a time, each on its own connection: a quarter are submits repeating a
// known nonce (the answer must be that nonce's id), the rest status calls of 1,000 distinct
// ids (the answer must name the id asked for). CAF's remoting lost about 1 in 2,300 here and
// sometimes gave an answer to the wrong client.
TEST(client_protocol, concurrent_calls_on_fresh_connections_are_each_answered_by_their_own) {
  temp_dir dir;
  node n{dir.path() / "data"};
  ASSERT_TRUE(n.start()) << n.log_tail();
  constexpr size_t ids_n = 1000;
  std::vector<uint64_t> ids(ids_n);
  for (size_t k = 0; k < ids_n; ++k) {
    auto r = call(n.port(), submit_req("n-" + std::to_string(k)));
    ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
    ids[k] = r.id();
  }
  const size_t calls = env_or("PROCTOR_CONCURRENT_CALLS", 20'000);
  std::atomic<size_t> lost{0}, misdirected{0};
  std::vector<std::string> examples;
  std::mutex mtx;
  auto rate = run_calls(calls, [&](size_t i) {
    auto k = (i * 7919) % ids_n;  // neighbouring calls ask for different ids
    bool submit = i % 4 == 0;
    pb::Request req;
    if (submit) {
      req = submit_req("n-" + std::to_string(k));
    } else {
      req.mutable_status()->set_id(ids[k]);
    }
    auto r = call(n.port(), req);
    if (r.code() != pb::Response::OK) {
      ++lost;
      std::lock_guard<std::mutex> g(mtx);
      if (examples.size() < 5)
        examples.push_back(r.error());
      return;
    }
    if ((submit ? r.id() : r.status().id()) != ids[k])
      ++misdirected;
  });
  EXPECT_EQ(lost.load(), 0u) << "e.g. " << (examples.empty() ? "" : examples.front());
  EXPECT_EQ(misdirected.load(), 0u);
  std::printf("[ measured ] %zu calls on fresh connections, %d threads: %.0f calls/s\n", calls,
              threads, rate);
  n.kill();
}

// A client leaves nothing behind in the node: after a warm-up, 100,000 calls on fresh
// connections (PROCTOR_RSS_CALLS to change) must not grow the node's resident memory by more
// than 8 MB. Under CAF's remoting every short-lived client cost ~1.4 KB for good.
TEST(client_protocol, node_memory_stays_flat_over_many_short_connections) {
  temp_dir dir;
  node n{dir.path() / "data"};
  ASSERT_TRUE(n.start()) << n.log_tail();
  auto id = call(n.port(), submit_req("rss")).id();
  ASSERT_NE(id, 0u);
  pb::Request status;
  status.mutable_status()->set_id(id);
  std::atomic<size_t> failed{0};
  auto one = [&](size_t) {
    if (call(n.port(), status).status().id() != id)
      ++failed;
  };
  run_calls(10'000, one);
  auto before = rss_kib(n.pid());
  const size_t calls = env_or("PROCTOR_RSS_CALLS", 100'000);
  auto rate = run_calls(calls, one);
  auto after = rss_kib(n.pid());
  ASSERT_GT(before, 0);
  EXPECT_EQ(failed.load(), 0u);
  EXPECT_LT(after - before, 8 * 1024)
    << "VmRSS " << before << " KiB -> " << after << " KiB over " << calls << " calls";
  std::printf("[ measured ] node VmRSS %ld KiB -> %ld KiB over %zu calls (%.0f calls/s)\n", before,
              after, calls, rate);
  n.kill();
}

}  // namespace
