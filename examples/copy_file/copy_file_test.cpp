// example.copy_file against a crash at every journal boundary, and the docs' copy of it.
#include "copy_file.hpp"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <proctor/crash_harness.hpp>

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A scratch directory for one test, removed after it.
struct scratch {
  std::string path;
  scratch() {
    char tmpl[] = "/tmp/copy_file_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

TEST(copy_file, survives_a_crash_at_every_journal_boundary) {
  scratch dir;
  std::filesystem::create_directory(dir.path + "/files");
  auto src = dir.path + "/files/a", dst = dir.path + "/files/b";
  std::ofstream(src) << "the payload";
  proctor::registry types;
  example::register_copy_file(types);
  proctor::testing::crash_matrix_options o;
  o.types = &types;
  o.type = "example.copy_file";
  o.args_json = R"({"src":")" + src + R"(","dst":")" + dst + R"("})";
  o.work_dir = dir.path;  // each run gets its own data directory here
  o.reset = [&] {         // put the world back as before the run: only the source
    for (const auto& e : std::filesystem::directory_iterator(dir.path + "/files"))
      if (e.path() != src)
        std::filesystem::remove(e.path());
  };
  o.check = [&](const proctor::testing::crash_run& r) -> std::string {
    if (r.root.state() != proctor::pb::SUCCESS)
      return "ended " + proctor::pb::ProcState_Name(r.root.state());
    return read(dst) == "the payload" ? "" : "lost the copy";
  };
  auto report = proctor::testing::run_crash_matrix(o);
  EXPECT_TRUE(report.ok()) << report.summary();
}

// docs/writing-a-procedure.md shows these files, and docs/crash-testing.md the crash test
// above: they must show them as they are.
TEST(copy_file, the_docs_show_these_files_as_they_are) {
  auto writing = read(PROCTOR_SOURCE_DIR "/docs/writing-a-procedure.md");
  ASSERT_FALSE(writing.empty());
  for (const char* f : {"copy_file.proto", "copy_file.hpp"}) {
    auto text = read(std::string(PROCTOR_SOURCE_DIR "/examples/copy_file/") + f);
    ASSERT_FALSE(text.empty()) << f;
    EXPECT_NE(writing.find(text), std::string::npos)
      << f << " differs from docs/writing-a-procedure.md's copy";
  }
  auto crash = read(PROCTOR_SOURCE_DIR "/docs/crash-testing.md");
  ASSERT_FALSE(crash.empty());
  auto test = read(PROCTOR_SOURCE_DIR "/examples/copy_file/copy_file_test.cpp");
  auto from = test.find("TEST(copy_file, survives");
  auto to = test.find("\n}\n", from);
  ASSERT_NE(to, std::string::npos);
  EXPECT_NE(crash.find(test.substr(from, to + 3 - from)), std::string::npos)
    << "the crash test differs from docs/crash-testing.md's copy";
}

}  // namespace
