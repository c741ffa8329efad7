// The seed-writing tool both fuzzers become when built with -DPROCTOR_FUZZ_SEEDS_MAIN:
// `NAME_seeds DIR` writes each seed into DIR and runs it once (every seed must pass, or the
// fuzzer would start from a crash).
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int*, char***);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t);

namespace proctor::fuzz {

inline int write_seeds(int argc, char** argv, const char* fuzzer,
                       const std::vector<std::pair<std::string, std::string>>& seeds) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\nwrites the seed corpus of %s\n", argv[0], fuzzer);
    return 2;
  }
  LLVMFuzzerInitialize(&argc, &argv);
  for (const auto& [name, bytes] : seeds) {
    std::ofstream out(std::string(argv[1]) + "/seed-" + name, std::ios::binary);
    out << bytes;
    if (!out) {
      std::fprintf(stderr, "cannot write seed %s into %s\n", name.c_str(), argv[1]);
      return 1;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  return 0;
}

}  // namespace proctor::fuzz
