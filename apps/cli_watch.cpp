// `proctor watch ID`: the tree of a procedure, drawn again at a bounded interval until the
// procedure ends; exits as `wait` does (0 SUCCESS, 1 ROLLEDBACK / FAILED, 2 --timeout-s ran
// out, 3 node unreachable). On a terminal the screen is redrawn in place; in a pipe the tree
// is printed again only when a state or a wait changed, so a log of it stays readable.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "actors/wire/json/views_json.hpp"
#include "actors/wire/wall_clock.hpp"
#include "apps/cli_operators.hpp"

namespace proctor::cli {

namespace {

/// What a pipe's reader needs a new print for: states and waits, not the ticking times.
std::string signature(const google::protobuf::RepeatedPtrField<pb::ProcStatus>& xs) {
  std::string out;
  for (const auto& s : xs)
    out += std::to_string(s.id()) + ":" + std::to_string(s.state()) + ":" + s.waiting_for() + ":"
           + (has_ended(s) ? "e" : "") + ";";
  return out;
}

int exit_for(const pb::ProcStatus& s) {
  return s.state() == pb::SUCCESS ? exit_ok : exit_error;
}

}  // namespace

void add_watch_command(CLI::App& app, runner* run) {
  struct args {
    uint64_t id = 0;
    uint64_t interval_ms = 1000;
    uint64_t timeout_s = 0;
    size_t max_children = 10;
  };
  auto a = std::make_shared<args>();
  auto* watch = app.add_subcommand(
    "watch", "Show a procedure's tree live until the procedure ends; exits as wait does");
  watch->add_option("id", a->id, "Procedure id")->required();
  watch->add_option("--interval-ms", a->interval_ms, "Redraw every N ms (default 1000)")
    ->check(CLI::Range(uint64_t{100}, uint64_t{60'000}));
  watch->add_option("--timeout-s", a->timeout_s, "Give up after N seconds (exit 2)")
    ->check(CLI::Range(uint64_t{1}, uint64_t{10'000'000}));
  watch->add_option("--max-children", a->max_children,
                    "Children shown per procedure under its progress bar (0: all; default 10)");
  watch->callback([a, run] {
    *run = [a](const caller& call) {
      using clock = std::chrono::steady_clock;
      std::optional<clock::time_point> deadline;
      if (a->timeout_s > 0)
        deadline = clock::now() + std::chrono::seconds{a->timeout_s};
      tree_options o;
      o.colours = palette::for_stdout();
      o.max_children = a->max_children;
      bool terminal = o.colours.on;
      std::string last;
      for (;;) {
        auto next = clock::now() + std::chrono::milliseconds{a->interval_ms};
        auto got = fetch_tree(call, a->id);
        if (auto* rc = std::get_if<int>(&got))
          return *rc;
        const auto& r = std::get<pb::Response>(got);
        const pb::ProcStatus* me = nullptr;
        size_t done = 0;
        for (const auto& s : r.list()) {
          done += has_ended(s) ? 1 : 0;
          if (s.id() == a->id)
            me = &s;
        }
        o.now_ms = wall_ms();
        auto text = render_tree(r.list(), o);
        auto head = "procedure " + std::to_string(a->id) + ": " + progress_bar(done, r.list_size())
                    + " procedures of its tree ended\n";
        for (const auto& u : r.unreachable())
          head += "note: " + u + "\n";
        bool ended = me != nullptr && has_ended(*me);
        if (terminal) {
          std::cout << "\033[H\033[2J" << head << text << std::flush;
        } else if (auto sig = signature(r.list()); sig != last || ended) {
          last = sig;
          std::cout << head << text << '\n' << std::flush;
        }
        if (ended)
          return exit_for(*me);
        if (deadline && clock::now() >= *deadline) {
          std::cerr << "error: timed out watching procedure " << a->id << '\n';
          return exit_timeout;
        }
        auto wake = deadline ? std::min(next, *deadline) : next;
        std::this_thread::sleep_until(wake);
      }
    };
  });
}

}  // namespace proctor::cli
