#include "actors/base/leader_fence.hpp"

#include <atomic>
#include <thread>

#include <spdlog/spdlog.h>

namespace proctor::leader_fence {

namespace {
// Installed once and kept for the life of the process (see the header): never freed, so a
// thread that loaded it never sees it go away.
std::atomic<const std::function<bool()>*> probe{nullptr};
}  // namespace

void install(std::function<bool()> sure) {
  probe.store(new std::function<bool()>(std::move(sure)), std::memory_order_release);
}

bool open() {
  const auto* p = probe.load(std::memory_order_acquire);
  return p == nullptr || (*p)();
}

bool wait_open(const std::function<bool()>& stopping, std::chrono::milliseconds report) {
  if (open())
    return true;
  auto since = std::chrono::steady_clock::now();
  auto next_report = since + report;
  while (!open()) {
    if (stopping())
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
    if (auto now = std::chrono::steady_clock::now(); now >= next_report) {
      spdlog::warn("a step waits: this replica is not sure it still leads ({} ms so far)",
                   std::chrono::duration_cast<std::chrono::milliseconds>(now - since).count());
      next_report = now + report;
    }
  }
  return true;
}

}  // namespace proctor::leader_fence
