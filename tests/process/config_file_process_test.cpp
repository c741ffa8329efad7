// proctord --config FILE (docs/command-line.md#configuration-file): a TOML file of the
// command line's options, which the command line overrides; an unknown key, a bad value or
// a missing file is one line naming it, and exit 64.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using proctor::test::bin_path;
using proctor::test::describe;
using proctor::test::lines;
using proctor::test::node;
using proctor::test::run_program;
using proctor::test::run_result;
using proctor::test::temp_dir;

fs::path write_file(const fs::path& path, const std::string& text) {
  std::ofstream{path} << text;
  return path;
}

bool log_has(const node& n, const std::string& what) {
  std::ifstream in{n.log_file()};
  for (std::string line; std::getline(in, line);)
    if (line.find(what) != std::string::npos)
      return true;
  return false;
}

/// proctord run with `args` until it exits (a refused configuration exits at once).
run_result proctord(const std::vector<std::string>& args) {
  return run_program(bin_path("proctord"), args, 30s);
}

/// Exit 64 and one line on stderr that holds every one of `words`.
void expect_usage_error(const run_result& r, const std::vector<std::string>& words) {
  EXPECT_FALSE(r.timed_out) << describe(r);
  EXPECT_EQ(r.exit_code, 64) << describe(r);
  auto ls = lines(r.out + r.err);
  ASSERT_EQ(ls.size(), 1u) << describe(r);
  for (const auto& w : words)
    EXPECT_NE(ls[0].find(w), std::string::npos) << "'" << w << "' not in: " << ls[0];
}

TEST(config_file, a_node_runs_from_its_config_file_alone) {
  temp_dir dir;
  auto data = dir.path() / "data";
  auto port = proctor::test::free_port();
  auto file = write_file(dir.path() / "node.toml",
                         "# a node's options, by their long names\n"
                         "data-dir = \""
                           + data.string() + "\"\nlisten = \"127.0.0.1:" + std::to_string(port)
                           + "\"\nworkers = 3\nlog-level = \"info\"\nstandby = false\n"
                             "passivate-after-ms = 500\n");
  node n{data, port, {"--config", file.string()}};
  n.set_extra_args_only(true);
  ASSERT_TRUE(n.start()) << n.log_tail();
  EXPECT_TRUE(fs::is_directory(data)) << n.log_tail();
  EXPECT_TRUE(log_has(n, "with 3 worker(s), data in " + data.string())) << n.log_tail();
  EXPECT_EQ(n.stop(), 0) << n.log_tail();
}

TEST(config_file, the_command_line_overrides_the_file) {
  temp_dir dir;
  auto elsewhere = dir.path() / "not-this-one";
  auto file = write_file(dir.path() / "node.toml", "data-dir = \"" + elsewhere.string()
                                                     + "\"\nlisten = \"127.0.0.1:1\"\n"
                                                       "workers = 3\n");
  // The harness puts --data-dir and --listen on the command line, before these.
  node n{dir.path() / "data", 0, {"--config", file.string(), "--workers", "5"}};
  ASSERT_TRUE(n.start()) << n.log_tail();
  EXPECT_TRUE(log_has(n, "with 5 worker(s), data in " + n.data_dir().string())) << n.log_tail();
  EXPECT_FALSE(fs::exists(elsewhere));
  EXPECT_EQ(n.stop(), 0) << n.log_tail();
}

TEST(config_file, an_unknown_key_is_refused_naming_it) {
  temp_dir dir;
  auto data = (dir.path() / "data").string();
  auto file = write_file(dir.path() / "node.toml",
                         "data-dir = \"" + data + "\"\nlisten = \"127.0.0.1:1\"\nworkerz = 3\n");
  expect_usage_error(proctord({"--config", file.string()}), {"workerz", file.string()});
  EXPECT_FALSE(fs::exists(data)) << "refused, yet it opened the data directory";
  // Options have no sections: a section is refused as well.
  write_file(file, "data-dir = \"" + data + "\"\n[cluster]\npeers = \"b=127.0.0.1:2\"\n");
  expect_usage_error(proctord({"--config", file.string(), "--listen", "127.0.0.1:1"}),
                     {"[cluster]"});
}

// Issue 47.8: what is done once, by hand, is never read from a file that every later start
// reads too (a group recovered again, a backup restored again).
TEST(config_file, one_shot_options_are_refused_in_a_file) {
  temp_dir dir;
  auto data = (dir.path() / "data").string();
  for (const std::string line : {"recover-group = true", "restore-from = \"/backups/b\""}) {
    auto file = write_file(dir.path() / "node.toml",
                           "data-dir = \"" + data + "\"\nlisten = \"127.0.0.1:1\"\n" + line + "\n");
    auto key = line.substr(0, line.find(' '));
    expect_usage_error(proctord({"--config", file.string()}), {key, "configuration file"});
    EXPECT_FALSE(fs::exists(data)) << "refused, yet it opened the data directory";
  }
}

TEST(config_file, a_bad_value_is_refused_naming_its_key) {
  temp_dir dir;
  auto data = (dir.path() / "data").string();
  auto file = dir.path() / "node.toml";
  for (std::string bad : {"workers = 0", "workers = \"many\"", "log-level = \"loud\"",
                          "passivate-after-ms = -2", "standby = maybe"}) {
    SCOPED_TRACE(bad);
    write_file(file, "data-dir = \"" + data + "\"\nlisten = \"127.0.0.1:1\"\n" + bad + "\n");
    auto key = bad.substr(0, bad.find(' '));
    expect_usage_error(proctord({"--config", file.string()}), {key});
  }
  // A value the command line refuses after parsing names its option the same way.
  write_file(file, "data-dir = \"" + data + "\"\nlisten = \"nowhere\"\n");
  expect_usage_error(proctord({"--config", file.string()}), {"--listen", "nowhere"});
  EXPECT_FALSE(fs::exists(data)) << "refused, yet it opened the data directory";
}

// TOML a lenient reader would take: a string without its closing quote, text after a value.
// Refused before anything is opened, naming the line and the key (before, the node opened its
// journal and exited 1 at the bind of "127.0.0.1:8199 with its stray quote).
TEST(config_file, a_malformed_line_is_refused_before_anything_is_opened) {
  temp_dir dir;
  auto data = (dir.path() / "data").string();
  auto file = dir.path() / "node.toml";
  for (std::string bad : {"http = \"127.0.0.1:8199", "http = '127.0.0.1:8199"}) {
    SCOPED_TRACE(bad);
    write_file(file, "data-dir = \"" + data + "\"\nlisten = \"127.0.0.1:1\"\n" + bad + "\n");
    expect_usage_error(proctord({"--config", file.string()}), {file.string() + ":3", "'http'"});
    EXPECT_FALSE(fs::exists(data)) << "refused, yet it opened the data directory";
  }
  // Text after a value: CLI11 reads two values, and says so.
  write_file(file, "data-dir = \"" + data
                     + "\"\nlisten = \"127.0.0.1:1\"\nhttp = \"127.0.0.1:8199\" x\n");
  expect_usage_error(proctord({"--config", file.string()}), {"--http"});
  EXPECT_FALSE(fs::exists(data)) << "refused, yet it opened the data directory";
  // A quote inside a string, and a comment after one, are fine.
  write_file(file, "data-dir = \"" + data + "\" # here\nlisten = \"nowhere\\\"\"\n");
  expect_usage_error(proctord({"--config", file.string()}), {"--listen"});
}

TEST(config_file, a_missing_file_is_refused_naming_it) {
  temp_dir dir;
  auto missing = (dir.path() / "no-such.toml").string();
  expect_usage_error(proctord({"--config", missing, "--data-dir", (dir.path() / "d").string(),
                               "--listen", "127.0.0.1:1"}),
                     {"--config", missing});
}

}  // namespace
