// Test support: the seed of a seeded random test, so that a failure can be replayed.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>

namespace proctor::testing {

/// A seeded random test's seed: the environment variable `name` when set (to replay a
/// failure), else a fresh one. The test prints it with SCOPED_TRACE.
inline uint64_t seed_from_env(const char* name = "PROCTOR_SEED") {
  if (const char* s = std::getenv(name))
    return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

}  // namespace proctor::testing
