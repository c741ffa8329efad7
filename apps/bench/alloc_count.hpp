// Heap allocations counted in proctor-bench's processes (docs/benchmarks.md, "What a
// procedure costs"): this program replaces the global operator new with one that counts
// before it calls malloc. Only proctor-bench links it; nodes (proctord) count nothing.
#pragma once

#include <cstdint>

namespace proctor::bench {

/// The C++ heap allocations (operator new, every form) made so far by this process's
/// threads. malloc called directly (C libraries: libuv, libraft, RocksDB's arena blocks are
/// new[]) is not counted.
uint64_t heap_allocations();

}  // namespace proctor::bench
