// example.release against a crash at every journal boundary: published when it is approved
// (the harness posts the approval event when the release waits for it), nothing left behind
// when its check fails or its approval does not come in time and the tree rolls back.
#include "release.hpp"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <proctor/crash_harness.hpp>

namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A scratch directory for one test, removed after it.
struct scratch {
  std::string path;
  scratch() {
    char tmpl[] = "/tmp/release_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// The crash matrix of a release of two files into `dir`/releases, with `max_bytes`, waiting
/// `approval_ms` for its approval (0: none needed), its files written on `writers_on` ("":
/// the release's node).
proctor::testing::crash_matrix_options release_matrix(const scratch& dir,
                                                      const proctor::registry& types, int max_bytes,
                                                      int approval_ms = 0,
                                                      const std::string& writers_on = "") {
  auto releases = dir.path + "/releases";
  proctor::testing::crash_matrix_options o;
  o.types = &types;
  o.type = "example.release";
  o.args_json = R"({"dir":")" + releases + R"(","name":"v1","max_bytes":)"
                + std::to_string(max_bytes) + R"(,"approval_timeout_ms":)"
                + std::to_string(approval_ms) + R"(,"writers_on":")" + writers_on
                + R"(","files":[{"name":"a","content":"alpha"},{"name":"b","content":"beta"}]})";
  o.work_dir = dir.path;  // each run gets its own data directory here
  o.reset = [releases] {  // put the world back as before the run: no releases
    fs::remove_all(releases);
    fs::create_directory(releases);
  };
  return o;
}

TEST(release, is_published_once_approved_whatever_crash_comes) {
  scratch dir;
  proctor::registry types;
  release::register_release(types);
  auto o = release_matrix(dir, types, 100, 60000);
  // Posted when the release waits for it, in every run; the matrix crashes around its
  // arrival and its delivery too.
  o.events = {{"approve:v1", R"({"by":"ana"})"}};
  o.check = [&](const proctor::testing::crash_run& r) -> std::string {
    if (r.root.state() != proctor::pb::SUCCESS)
      return "ended " + proctor::pb::ProcState_Name(r.root.state()) + ": " + r.root.error();
    auto v1 = fs::path(dir.path) / "releases" / "v1";
    if (read(v1 / "a") != "alpha" || read(v1 / "b") != "beta")
      return "the published files are not the release's";
    if (fs::exists(v1.string() + ".staging"))
      return "the staging directory is left";
    return "";
  };
  auto report = proctor::testing::run_crash_matrix(o);
  EXPECT_TRUE(report.ok()) << report.summary();
}

// The files are written on node b while the release waits on a: the matrix crashes each
// node at each of its own boundaries (the other goes on), and posts the approval on a.
TEST(release, written_on_another_node_is_published_whatever_crash_comes_to_either) {
  scratch dir;
  proctor::registry types;
  release::register_release(types);
  auto o = release_matrix(dir, types, 100, 60000, "b");
  o.nodes = {"a", "b"};
  o.events = {{"approve:v1", R"({"by":"ana"})"}};
  o.check = [&](const proctor::testing::crash_run& r) -> std::string {
    if (r.root.state() != proctor::pb::SUCCESS)
      return "ended " + proctor::pb::ProcState_Name(r.root.state()) + ": " + r.root.error();
    auto v1 = fs::path(dir.path) / "releases" / "v1";
    if (read(v1 / "a") != "alpha" || read(v1 / "b") != "beta")
      return "the published files are not the release's";
    return "";
  };
  auto report = proctor::testing::run_crash_matrix(o);
  EXPECT_TRUE(report.ok()) << report.summary();
  auto on_b = std::count_if(report.boundary_labels.begin(), report.boundary_labels.end(),
                            [](const std::string& l) { return l.rfind("b: ", 0) == 0; });
  EXPECT_GE(on_b, 4) << "the writers' records on b are boundaries too\n" << report.summary();
}

TEST(release, that_fails_its_check_leaves_nothing_whatever_crash_comes) {
  scratch dir;
  proctor::registry types;
  release::register_release(types);
  auto o = release_matrix(dir, types, 5);  // "alpha" and "beta" are 9 bytes
  o.check = [&](const proctor::testing::crash_run& r) -> std::string {
    if (r.root.state() != proctor::pb::ROLLEDBACK)
      return "ended " + proctor::pb::ProcState_Name(r.root.state());
    if (!fs::is_empty(fs::path(dir.path) / "releases"))
      return "the rollback left files behind";
    return "";
  };
  auto report = proctor::testing::run_crash_matrix(o);
  EXPECT_TRUE(report.ok()) << report.summary();
}

TEST(release, that_is_not_approved_in_time_leaves_nothing_whatever_crash_comes) {
  scratch dir;
  proctor::registry types;
  release::register_release(types);
  auto o = release_matrix(dir, types, 100, 50);  // no approval comes: RELEASE_EXPIRED runs
  o.check = [&](const proctor::testing::crash_run& r) -> std::string {
    if (r.root.state() != proctor::pb::ROLLEDBACK)
      return "ended " + proctor::pb::ProcState_Name(r.root.state());
    if (r.root.error().find("not approved within 50 ms") == std::string::npos)
      return "failed for another reason: " + r.root.error();
    if (!fs::is_empty(fs::path(dir.path) / "releases"))
      return "the rollback left files behind";
    return "";
  };
  auto report = proctor::testing::run_crash_matrix(o);
  EXPECT_TRUE(report.ok()) << report.summary();
}

}  // namespace
