// Test support: the demo procedures' fixture (a registry with them, a temporary ledger
// directory) and helpers. Used by procedures/'s demo tests.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include <proctor/demo.pb.h>

#include "procedures/demo.hpp"

namespace proctor::demo_testing {

namespace fs = std::filesystem;

struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/proctor_demo_test_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

inline std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    out.insert(e.path().filename().string());
  return out;
}

inline context make_ctx(uint64_t id, uint64_t root, uint64_t parent = 0) {
  context c;
  c.id_ = id;
  c.root_id_ = root;
  c.parent_id_ = parent;
  return c;
}

inline std::string ledger_file(uint64_t root, uint64_t id, int step) {
  return std::to_string(root) + "." + std::to_string(id) + "." + std::to_string(step);
}

class demo_test : public ::testing::Test {
protected:
  demo_test() { register_demo_procedures(reg); }

  std::unique_ptr<procedure> make(const std::string& type, const std::string& json) {
    std::string err;
    auto p = reg.make_from_json(type, json, &err);
    EXPECT_NE(p, nullptr) << err;
    return p;
  }

  std::unique_ptr<procedure> from_bytes(const std::string& type, const std::string& bytes) {
    std::string err;
    auto p = reg.make_from_bytes(type, bytes, &err);
    EXPECT_NE(p, nullptr) << err;
    return p;
  }

  std::string error_of(const std::string& type, const std::string& json) {
    std::string err;
    auto p = reg.make_from_json(type, json, &err);
    EXPECT_EQ(p, nullptr);
    return err;
  }

  std::string ledger_json(const std::string& extra = {}) {
    return R"({"ledger_dir": ")" + dir.path + "\"" + (extra.empty() ? "" : ", " + extra) + "}";
  }

  registry reg;
  temp_dir dir;
};

inline pb::LedgerData& ledger_data(procedure& p) {
  return dynamic_cast<pb::LedgerData&>(p.data());
}

}  // namespace proctor::demo_testing
