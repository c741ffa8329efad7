// Test support: a cluster group of real proctord processes on 127.0.0.1 (free ports, one
// temporary directory each), started by the test one at a time (--cluster-init, --seeds),
// and what every such test asks of them: the member states each lists, a peer seen up or
// down, the logs' tails for a failure.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace proctor::test {

class cluster_group_fixture : public ::testing::Test {
protected:
  using seconds = std::chrono::seconds;
  using milliseconds = std::chrono::milliseconds;

  struct member {
    std::string name;
    uint16_t port = 0;
    std::unique_ptr<node> proc;
  };

  /// Adds (does not start) node `name` taking part in the group, with `extra` arguments.
  member& add(const std::string& name, std::vector<std::string> extra) {
    member m;
    m.name = name;
    m.port = free_port();
    std::vector<std::string> args{"--name", name, "--group-port", std::to_string(free_port())};
    args.insert(args.end(), extra.begin(), extra.end());
    m.proc = std::make_unique<node>(dir_.path() / name, m.port, args);
    members_.push_back(std::move(m));
    return members_.back();
  }

  std::string seed_of(size_t i) const { return "127.0.0.1:" + std::to_string(members_[i].port); }

  /// A member's field as `view` (`cluster nodes --json`) lists it ("" when not listed).
  static std::string member_field(const google::protobuf::Value& view, const std::string& name,
                                  const std::string& key) {
    for (const auto& m : field(view, "members").list_value().values())
      if (m.struct_value().fields().at("name").string_value() == name) {
        const auto& v = m.struct_value().fields().at(key);
        return v.has_number_value() ? std::to_string(static_cast<uint64_t>(v.number_value()))
                                    : v.string_value();
      }
    return {};
  }

  /// The member states node i lists.
  std::map<std::string, std::string> states_seen_by(size_t i) {
    std::map<std::string, std::string> out;
    auto r = members_[i].proc->ctl({"cluster", "nodes", "--json"}, seconds{15});
    auto v = r.exit_code == 0 ? parse_json(r.out) : std::nullopt;
    if (!v)
      return out;
    for (const auto& m : field(*v, "members").list_value().values())
      out[m.struct_value().fields().at("name").string_value()] =
        m.struct_value().fields().at("state").string_value();
    return out;
  }

  /// Whether node i sees peer `name` up (or down) within `limit`.
  bool sees_up(size_t i, const std::string& name, bool up,
               std::chrono::milliseconds limit = seconds{30}) {
    return eventually(
      [&] {
        auto v = parse_json(members_[i].proc->ctl({"nodes", "--json"}, seconds{10}).out);
        if (!v)
          return false;
        for (const auto& x : v->list_value().values())
          if (x.struct_value().fields().at("name").string_value() == name)
            return x.struct_value().fields().at("up").bool_value() == up;
        return false;
      },
      limit, milliseconds{200});
  }

  /// Whether every running member lists `want` (name: state) within `limit`.
  bool all_see(const std::map<std::string, std::string>& want,
               std::chrono::milliseconds limit = seconds{30}) {
    return eventually(
      [&] {
        for (size_t i = 0; i < members_.size(); ++i)
          if (members_[i].proc->running() && states_seen_by(i) != want)
            return false;
        return true;
      },
      limit, milliseconds{200});
  }

  /// Runs `args` on node i until it exits 0 or `limit` passed (what an operator does with a
  /// command refused for now, such as `node remove` while the node still holds work): the
  /// last try's result.
  run_result ctl_until_ok(size_t i, const std::vector<std::string>& args,
                          std::chrono::milliseconds limit) {
    run_result r;
    eventually(
      [&] {
        r = members_[i].proc->ctl(args, seconds{30});
        return r.exit_code == 0;
      },
      limit, milliseconds{200});
    return r;
  }

  /// What each running node lists (name: state), for a failure's message.
  std::string seen() {
    std::string out;
    for (size_t i = 0; i < members_.size(); ++i) {
      if (!members_[i].proc->running())
        continue;
      out += members_[i].name + " lists:";
      for (const auto& [name, state] : states_seen_by(i))
        out += " " + name + "=" + state;
      out += "\n";
    }
    return out;
  }

  /// The last `n` lines of every node's log, without those holding `skip` (when not empty).
  std::string logs(size_t n = 12, const std::string& skip = {}) {
    std::string out;
    for (const auto& m : members_) {
      out += "--- " + m.name + ":\n";
      if (skip.empty()) {
        out += m.proc->log_tail(n);
        continue;
      }
      std::vector<std::string> kept;
      for (const auto& line : lines(read_file(m.proc->log_file())))
        if (line.find(skip) == std::string::npos)
          kept.push_back(line);
      for (size_t k = kept.size() > n ? kept.size() - n : 0; k < kept.size(); ++k)
        out += kept[k] + "\n";
    }
    return out;
  }

  temp_dir dir_;
  std::vector<member> members_;
};

}  // namespace proctor::test
