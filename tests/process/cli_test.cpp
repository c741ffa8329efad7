// The operator CLI's contract (docs/command-line.md) against a real node: bad input, the data
// directory (a second node on one in use), exit codes, the status JSON and list filters (abort,
// release, metrics, many clients and SIGTERM: cli_actions_test.cpp).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "actors/wire/json/status_json.hpp"
#include "tests/process/cli_fixture.hpp"
#include "tests/process/process_harness.hpp"

namespace {

// fs, the chrono literals, Value, clock_type and the harness's names: cli_fixture.hpp.
using namespace proctor::test::cli_support;

// -- bad input --------------------------------------------------------------------------------

TEST(cli, unknown_type_is_an_error_naming_the_type) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto r = f.n.ctl({"submit", "demo.no_such_type", "--args-json", "{}"});
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("demo.no_such_type"), std::string::npos) << r.err;
  f.n.kill();
}

TEST(cli, malformed_or_invalid_args_json_is_a_one_line_error) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  for (std::string bad : {"{bad", R"({"steps":)", R"({"steps":"three"})", "[1,2]",
                          R"({"no_such_field":1})", "{\n\"steps\":\n}"}) {
    SCOPED_TRACE(bad);
    expect_one_line_error(f.n.ctl({"submit", "demo.noop", "--args-json", bad}));
  }
  // Well-formed but refused by the type's validate().
  auto r = f.n.ctl({"submit", "demo.ledger", "--args-json", R"({"steps":3})"});
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("ledger_dir"), std::string::npos) << r.err;
  // Nothing of it was created.
  auto all = f.n.ctl({"list", "--all", "--json"});
  ASSERT_EQ(all.exit_code, 0) << describe(all);
  EXPECT_EQ(trim(all.out), "[]");
  f.n.kill();
}

// The kernel refuses a command-line argument past 128 KiB ("Argument list too long"): args
// that large come from a file, or from standard input.
TEST(cli, args_of_a_mebibyte_come_from_a_file_or_standard_input) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto big_request = [](char c) { return "big-" + std::string(1'000'000, c); };
  auto args = [](const std::string& request) {
    return R"({"service":"demo.echo","request":")" + request + "\"}";
  };
  auto file = f.dir.path() / "args.json";
  // Each way: the submit takes it, and the echo's reply brings the whole request back.
  for (bool from_stdin : {false, true}) {
    SCOPED_TRACE(from_stdin ? "stdin" : "file");
    auto request = big_request(from_stdin ? 'y' : 'x');
    std::ofstream(file, std::ios::binary | std::ios::trunc) << args(request);
    ASSERT_GT(fs::file_size(file), 1'000'000u);
    auto r = from_stdin ? run_proctor(
               {"--node", f.n.address(), "submit", "demo.call", "--args-file", "-"}, 30s, file)
                        : f.n.ctl({"submit", "demo.call", "--args-file", file.string()}, 30s);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    auto id = parse_id(r.out);
    ASSERT_TRUE(id) << describe(r);
    auto w = f.n.ctl({"wait", std::to_string(*id), "--timeout-s", "60"}, 90s);
    ASSERT_EQ(w.exit_code, 0) << w.err;
    EXPECT_NE(w.out.find(request), std::string::npos) << w.out.substr(0, 300);
  }
  // --args-file and --args-json are exclusive; a file that cannot be read sends nothing.
  auto both = f.n.ctl({"submit", "demo.noop", "--args-json", "{}", "--args-file", file.string()});
  EXPECT_EQ(both.exit_code, 64) << describe(both);
  auto missing = (f.dir.path() / "no-such.json").string();
  auto r = f.n.ctl({"submit", "demo.noop", "--args-file", missing});
  expect_one_line_error(r, 64);
  EXPECT_EQ(trim(r.err), "error: --args-file " + missing + ": No such file or directory");
  // Over the node's limit: refused with the size and the limit, nothing created.
  std::ofstream(file, std::ios::binary | std::ios::trunc) << args(std::string(1 << 20, 'z'));
  auto over = f.n.ctl({"submit", "demo.call", "--args-file", file.string()});
  expect_one_line_error(over);
  EXPECT_NE(over.err.find("more than the limit of 1048576"), std::string::npos) << over.err;
  auto all = f.n.ctl({"list", "--json"});
  ASSERT_EQ(all.exit_code, 0) << describe(all);
  auto v = parse_json(all.out);
  ASSERT_TRUE(v) << all.out.substr(0, 300);
  EXPECT_EQ(v->list_value().values_size(), 2);
  f.n.kill();
}

TEST(cli, usage_errors_exit_64) {
  EXPECT_EQ(run_proctor({"--node", "127.0.0.1:1", "no-such-command"}).exit_code, 64);
  EXPECT_EQ(run_proctor({"status", "1"}).exit_code, 64);  // no --node
  EXPECT_EQ(run_proctor({"--node", "127.0.0.1:1", "status", "not-a-number"}).exit_code, 64);
  EXPECT_EQ(run_proctor({"--node", "127.0.0.1:1", "list", "--state", "BOGUS"}).exit_code, 64);
}

// -- the data directory -------------------------------------------------------------------------

TEST(cli, second_node_on_a_data_dir_in_use_exits_promptly_and_the_first_keeps_serving) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto t0 = clock_type::now();
  auto r = run_program(
    bin_path("proctord"),
    {"--data-dir", f.n.data_dir().string(), "--listen", "127.0.0.1:" + std::to_string(free_port())},
    15s);
  auto took = clock_type::now() - t0;
  EXPECT_FALSE(r.timed_out) << "the second proctord kept running";
  EXPECT_NE(r.exit_code, 0) << describe(r);
  EXPECT_LT(took, 5s);
  auto ls = lines(r.out + r.err);
  ASSERT_EQ(ls.size(), 1u) << describe(r);
  EXPECT_TRUE(ls[0].find("lock") != std::string::npos || ls[0].find("in use") != std::string::npos)
    << ls[0];

  ASSERT_TRUE(f.n.running()) << f.n.log_tail();
  auto id = f.submit("demo.ledger", f.ledger_args());
  auto w = f.n.ctl({"wait", std::to_string(id), "--timeout-s", "30"});
  EXPECT_EQ(w.exit_code, 0) << describe(w) << f.n.log_tail();
  f.n.kill();
}

TEST(cli, data_dir_under_a_regular_file_is_a_clear_error) {
  temp_dir dir;
  auto file = dir.path() / "plain-file";
  std::ofstream{file} << "not a directory\n";
  auto data = file / "data";
  auto r = run_program(
    bin_path("proctord"),
    {"--data-dir", data.string(), "--listen", "127.0.0.1:" + std::to_string(free_port())}, 15s);
  EXPECT_FALSE(r.timed_out) << "proctord kept running on an impossible data dir";
  EXPECT_NE(r.exit_code, 0) << describe(r);
  auto ls = lines(r.out + r.err);
  ASSERT_EQ(ls.size(), 1u) << describe(r);
  EXPECT_NE(ls[0].find(data.string()), std::string::npos) << ls[0];
  EXPECT_NE(ls[0].find("ot a directory"), std::string::npos) << ls[0];
}

// -- exit codes ---------------------------------------------------------------------------------

TEST(cli, unreachable_node_exits_3) {
  auto address = "127.0.0.1:" + std::to_string(free_port());
  for (std::vector<std::string> cmd : {std::vector<std::string>{"wait", "1"},
                                       {"wait", "1", "--timeout-s", "5"},
                                       {"status", "1"},
                                       {"list", "--json"},
                                       {"submit", "demo.noop"},
                                       {"metrics"}}) {
    cmd.insert(cmd.begin(), {"--node", address});
    auto r = run_proctor(cmd, 30s);
    SCOPED_TRACE(cmd[2]);
    expect_one_line_error(r, 3);
  }
}

// `wait` polls the node (10 s per request): a procedure that ends after the first poll, and
// a --timeout-s longer than one poll, still end the wait as they should.
TEST(cli, wait_outlasts_one_poll_and_keeps_its_timeout_across_polls) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto late = f.submit("demo.wait_event", R"({"key":"cli-late"})");
  auto never = f.submit("demo.wait_event", R"({"key":"cli-never-2"})");
  ASSERT_TRUE(f.reaches(late, "WAITING")) << f.n.log_tail();
  run_result timed_out;
  auto t0 = clock_type::now();
  std::thread other([&] {
    timed_out = f.n.ctl({"wait", std::to_string(never), "--timeout-s", "12"}, 40s);
  });
  std::thread eventer([&] {
    std::this_thread::sleep_for(11s);
    f.n.ctl({"event", "cli-late", "--payload-json", "7"});
  });
  auto r = f.n.ctl({"wait", std::to_string(late)}, 40s);
  eventer.join();
  other.join();
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_GE(clock_type::now() - t0, 11s);
  EXPECT_EQ(timed_out.exit_code, 2) << describe(timed_out);
  EXPECT_GE(clock_type::now() - t0, 12s);
  auto v = parse_json(timed_out.out);
  ASSERT_TRUE(v) << describe(timed_out);
  EXPECT_EQ(state_of(*v), "WAITING");
  f.n.kill();
}

TEST(cli, wait_timeout_on_a_suspended_procedure_exits_2_with_its_status) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.wait_event", R"({"key":"cli-never"})");
  ASSERT_TRUE(f.reaches(id, "WAITING")) << f.n.log_tail();
  auto t0 = clock_type::now();
  auto r = f.n.ctl({"wait", std::to_string(id), "--timeout-s", "1"}, 30s);
  auto took = clock_type::now() - t0;
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 5s);
  auto v = parse_json(r.out);
  ASSERT_TRUE(v) << describe(r);
  EXPECT_EQ(state_of(*v), "WAITING");
  EXPECT_EQ(id_of(*v), id);
  EXPECT_EQ(lines(r.err).size(), 1u) << describe(r);
  f.n.kill();
}

TEST(cli, wait_on_a_rolled_back_procedure_exits_1) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.ledger", f.ledger_args(R"(,"fail_at":1)"));
  auto r = f.n.ctl({"wait", std::to_string(id), "--timeout-s", "30"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  auto v = parse_json(r.out);
  ASSERT_TRUE(v) << describe(r);
  EXPECT_EQ(state_of(*v), "ROLLEDBACK");
  EXPECT_NE(field(*v, "error").string_value().find("fail_at"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(f.ledger));
  // Waiting again on an ended procedure answers at once, the same way.
  auto again = f.n.ctl({"wait", std::to_string(id)}, 30s);
  EXPECT_EQ(again.exit_code, 1) << describe(again);
  f.n.kill();
}

// -- status and list ------------------------------------------------------------------------------

TEST(cli, status_json_has_the_contract_keys_with_numbers_as_numbers) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto root = f.submit("demo.ledger", f.ledger_args(R"(,"children":2,"depth":1)"));
  ASSERT_EQ(f.n.ctl({"wait", std::to_string(root), "--timeout-s", "30"}).exit_code, 0)
    << f.n.log_tail();

  for (auto flag : {std::vector<std::string>{"--json"}, std::vector<std::string>{}}) {
    auto cmd = std::vector<std::string>{"status", std::to_string(root)};
    cmd.insert(cmd.end(), flag.begin(), flag.end());
    auto r = f.n.ctl(cmd);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(lines(r.out).size(), 1u) << "one object on one line: " << r.out;
    EXPECT_TRUE(proctor::is_valid_json(r.out)) << r.out;
    EXPECT_EQ(r.err, "");
    auto v = parse_json(r.out);
    ASSERT_TRUE(v && v->has_struct_value()) << r.out;
    for (auto key : {"id", "type", "state", "root_id", "parent_id", "children", "error", "result"})
      EXPECT_TRUE(v->struct_value().fields().count(key)) << "no key " << key << ": " << r.out;
    for (auto key : {"id", "root_id", "parent_id"})
      EXPECT_TRUE(field(*v, key).has_number_value()) << key << " is not a number: " << r.out;
    for (auto key : {"type", "state", "error"})
      EXPECT_TRUE(field(*v, key).has_string_value()) << key << " is not a string: " << r.out;
    ASSERT_TRUE(field(*v, "children").has_list_value()) << r.out;
    EXPECT_EQ(id_of(*v), root);
    EXPECT_EQ(field(*v, "type").string_value(), "demo.ledger");
    EXPECT_EQ(state_of(*v), "SUCCESS");
    EXPECT_EQ(field(*v, "root_id").number_value(), static_cast<double>(root));
    EXPECT_EQ(field(*v, "parent_id").number_value(), 0.0);
    EXPECT_EQ(field(*v, "error").string_value(), "");
    // The ledger's result is {"steps":3}, embedded as JSON (not as a string).
    ASSERT_TRUE(field(*v, "result").has_struct_value()) << r.out;
    EXPECT_EQ(field(field(*v, "result"), "steps").number_value(), 3.0) << r.out;
    // The literal text has numbers unquoted.
    EXPECT_NE(r.out.find("\"id\":" + std::to_string(root) + ","), std::string::npos) << r.out;

    auto& kids = field(*v, "children").list_value();
    ASSERT_EQ(kids.values_size(), 2) << r.out;
    for (auto& k : kids.values()) {
      ASSERT_TRUE(k.has_number_value()) << r.out;
      auto c = f.status(static_cast<uint64_t>(k.number_value()));
      ASSERT_TRUE(c);
      EXPECT_EQ(field(*c, "parent_id").number_value(), static_cast<double>(root));
      EXPECT_EQ(field(*c, "root_id").number_value(), static_cast<double>(root));
      EXPECT_EQ(field(*c, "children").list_value().values_size(), 0);
    }
  }

  // A procedure without a result has "result":null.
  auto w = f.submit("demo.wait_event", R"({"key":"cli-status"})");
  ASSERT_TRUE(f.reaches(w, "WAITING"));
  auto s = f.status(w);
  ASSERT_TRUE(s);
  EXPECT_TRUE(field(*s, "result").has_null_value());
  f.n.kill();
}

TEST(cli, list_shows_roots_all_shows_children_and_state_filters) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto tree = f.submit("demo.ledger", f.ledger_args(R"(,"children":2,"depth":1)"));
  auto single = f.submit("demo.ledger", f.ledger_args());
  auto waiter = f.submit("demo.wait_event", R"({"key":"cli-list"})");
  for (auto id : {tree, single})
    ASSERT_EQ(f.n.ctl({"wait", std::to_string(id), "--timeout-s", "30"}).exit_code, 0);
  ASSERT_TRUE(f.reaches(waiter, "WAITING"));

  auto ids_of = [&](std::vector<std::string> args) {
    args.push_back("--json");
    auto r = f.n.ctl(args);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_TRUE(proctor::is_valid_json(r.out)) << r.out;
    std::set<uint64_t> ids;
    std::set<std::string> states;
    auto v = parse_json(r.out);
    EXPECT_TRUE(v && v->has_list_value()) << r.out;
    if (v)
      for (auto& p : v->list_value().values()) {
        ids.insert(id_of(p));
        states.insert(state_of(p));
      }
    return std::pair{ids, states};
  };
  auto tree_status = f.status(tree);
  ASSERT_TRUE(tree_status);
  std::set<uint64_t> children;
  for (auto& c : field(*tree_status, "children").list_value().values())
    children.insert(static_cast<uint64_t>(c.number_value()));
  ASSERT_EQ(children.size(), 2u);

  auto [roots, _] = ids_of({"list"});
  EXPECT_EQ(roots, (std::set<uint64_t>{tree, single, waiter}));

  auto [all, all_states] = ids_of({"list", "--all"});
  std::set<uint64_t> want_all{tree, single, waiter};
  want_all.insert(children.begin(), children.end());
  EXPECT_EQ(all, want_all);

  auto [succeeded, s_states] = ids_of({"list", "--state", "SUCCESS"});
  EXPECT_EQ(succeeded, (std::set<uint64_t>{tree, single}));
  EXPECT_EQ(s_states, (std::set<std::string>{"SUCCESS"}));

  auto [succeeded_all, succeeded_all_states] = ids_of({"list", "--all", "--state", "SUCCESS"});
  std::set<uint64_t> want_succeeded_all{tree, single};
  want_succeeded_all.insert(children.begin(), children.end());
  EXPECT_EQ(succeeded_all, want_succeeded_all);

  auto [waiting, w_states] = ids_of({"list", "--state", "WAITING"});
  EXPECT_EQ(waiting, (std::set<uint64_t>{waiter}));

  auto [rolledback, rolledback_states] = ids_of({"list", "--state", "ROLLEDBACK"});
  EXPECT_TRUE(rolledback.empty());
  f.n.kill();
}

}  // namespace
