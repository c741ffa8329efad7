// `proctor tree ID`: a procedure's tree as indented text (colour on a terminal) or JSON.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "actors/wire/json/views_json.hpp"
#include "actors/wire/wall_clock.hpp"
#include "apps/cli_operators.hpp"

namespace proctor::cli {

int check(const pb::Response& r) {
  if (r.code() == pb::Response::OK)
    return exit_ok;
  auto text = r.error().empty() ? pb::Response::Code_Name(r.code()) : r.error();
  std::cerr << "error: " << text.substr(0, text.find('\n')) << '\n';
  if (r.code() == pb::Response::UNREACHABLE)
    return exit_unreachable;
  return r.code() == pb::Response::TIMEOUT ? exit_timeout : exit_error;
}

const char* palette::state(int s) const {
  if (!on)
    return "";
  switch (s) {
    case pb::SUCCESS:
      return "\033[32m";
    case pb::FAILED:
    case pb::ROLLEDBACK:
      return "\033[31m";
    case pb::WAITING:
    case pb::WAITING_TIMEOUT:
      return "\033[33m";
    case pb::RUNNABLE:
      return "\033[36m";
    default:
      return "";
  }
}

palette palette::for_stdout() {
  palette p;
  p.on = ::isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr;
  return p;
}

std::string human_ms(int64_t ms) {
  char buf[32];
  if (ms < 0)
    ms = 0;
  if (ms < 1000)
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
  else if (ms < 60'000)
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000);
  else if (ms < 3'600'000)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms / 1000 % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(ms / 3'600'000),
                  static_cast<long long>(ms / 60'000 % 60));
  return buf;
}

std::string progress_bar(size_t done, size_t total, size_t width) {
  size_t filled = total == 0 ? width : done * width / total;
  return "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] "
         + std::to_string(done) + "/" + std::to_string(total);
}

namespace {

/// Children above this count get a progress bar line.
constexpr size_t wide = 10;

class tree_printer {
public:
  tree_printer(const google::protobuf::RepeatedPtrField<pb::ProcStatus>& xs, const tree_options& o)
      : o_(o) {
    for (const auto& s : xs)
      by_id_.emplace(s.id(), &s);
  }

  void print(const pb::ProcStatus& s, const std::string& lead, const std::string& branch) {
    const auto& c = o_.colours;
    out_ += lead + branch + c.bold() + std::to_string(s.id()) + c.reset() + " " + s.type() + " "
            + c.state(s.state()) + pb::ProcState_Name(s.state()) + c.reset();
    if (s.bypassed())
      out_ += " (bypassed)";
    else if (!s.waiting_for().empty())
      out_ += " (" + s.waiting_for() + ")";
    if (s.started_at_ms() != 0) {
      auto end = has_ended(s) ? s.ended_at_ms() : o_.now_ms;
      out_ += std::string(" ") + c.dim() + human_ms(end - s.started_at_ms());
      if (!has_ended(s) && s.since_ms() != 0 && s.since_ms() > s.started_at_ms())
        out_ += ", " + human_ms(o_.now_ms - s.since_ms()) + " in this state";
      out_ += c.reset();
    }
    if (!s.node().empty())
      out_ += " @node " + s.node();
    if (!s.error().empty())
      out_ += " error: " + s.error().substr(0, s.error().find('\n'));
    out_ += '\n';

    std::vector<const pb::ProcStatus*> kids;
    size_t done = 0;
    for (auto id : s.children())
      if (auto i = by_id_.find(id); i != by_id_.end() && i->second != &s) {
        kids.push_back(i->second);
        done += has_ended(*i->second) ? 1 : 0;
      }
    auto inner = lead + (branch.empty() ? "" : branch == "└─ " ? "   " : "│  ");
    if (kids.size() > wide)
      out_ += inner + c.dim() + "children " + progress_bar(done, kids.size()) + " ended" + c.reset()
              + '\n';
    size_t hidden = 0;
    if (o_.max_children > 0 && kids.size() > o_.max_children) {
      // The ones still running are the interesting ones.
      std::stable_partition(kids.begin(), kids.end(),
                            [](const pb::ProcStatus* k) { return !has_ended(*k); });
      hidden = kids.size() - o_.max_children;
      kids.resize(o_.max_children);
    }
    for (size_t i = 0; i < kids.size(); ++i) {
      bool last = i + 1 == kids.size() && hidden == 0;
      print(*kids[i], inner, last ? "└─ " : "├─ ");
    }
    if (hidden > 0)
      out_ += inner + "└─ " + c.dim() + "… " + std::to_string(hidden) + " more" + c.reset() + '\n';
  }

  std::string take() { return std::move(out_); }

private:
  tree_options o_;
  std::map<uint64_t, const pb::ProcStatus*> by_id_;
  std::string out_;
};

}  // namespace

std::string render_tree(const google::protobuf::RepeatedPtrField<pb::ProcStatus>& xs,
                        const tree_options& o) {
  if (xs.empty())
    return {};
  tree_printer p(xs, o);
  p.print(xs[0], "", "");
  return p.take();
}

std::variant<pb::Response, int> fetch_tree(const caller& call, uint64_t id) {
  pb::Request req;
  req.mutable_tree()->set_id(id);
  auto got = call(req, std::chrono::seconds{30});
  if (auto* r = std::get_if<pb::Response>(&got); r != nullptr) {
    if (int rc = check(*r); rc != exit_ok)
      return rc;
  }
  return got;
}

void add_tree_command(CLI::App& app, runner* run) {
  struct args {
    uint64_t id = 0;
    bool json = false;
  };
  auto a = std::make_shared<args>();
  auto* tree = app.add_subcommand(
    "tree", "Print the tree a procedure belongs to: type, state, waiting_for, duration, node");
  tree->add_option("id", a->id, "Procedure id (any procedure of the tree)")->required();
  tree->add_flag("--json", a->json, "One JSON object, the children nested");
  tree->callback([a, run] {
    *run = [a](const caller& call) {
      auto got = fetch_tree(call, a->id);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      const auto& r = std::get<pb::Response>(got);
      // Nodes that did not give their parts: the tree shows their placeholders.
      for (const auto& u : r.unreachable())
        std::cerr << "note: " << u << '\n';
      if (a->json) {
        std::cout << tree_to_json(r.list(), wall_ms()) << '\n';
        return exit_ok;
      }
      tree_options o;
      o.colours = palette::for_stdout();
      o.now_ms = wall_ms();
      std::cout << render_tree(r.list(), o);
      return exit_ok;
    };
  });
}

void add_operator_commands(CLI::App& app, runner* run) {
  add_tree_command(app, run);
  add_watch_command(app, run);
  add_history_commands(app, run);
  add_security_commands(app, run);
  add_limits_command(app, run);
  add_retry_commands(app, run);
  add_queues_command(app, run);
  add_schedule_command(app, run);
  add_cluster_command(app, run);
}

}  // namespace proctor::cli
