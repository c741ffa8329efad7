// `proctor retry ID` and `proctor resubmit ID` (docs/flow-control.md, "Retry and resubmit").
#include <iostream>
#include <memory>

#include "actors/wire/json/status_json.hpp"
#include "apps/cli_operators.hpp"

namespace proctor::cli {

void add_retry_commands(CLI::App& app, runner* run) {
  auto id = std::make_shared<uint64_t>(0);

  auto* retry = app.add_subcommand(
    "retry", "Run a procedure's failed step again now, its attempts counting from 1 (a "
             "procedure FAILED past its point of no return, or backing off before its next "
             "attempt); prints its status");
  retry->add_option("id", *id, "Procedure id")->required();
  retry->callback([id, run] {
    *run = [id](const caller& call) {
      pb::Request req;
      req.mutable_retry()->set_id(*id);
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      std::cout << status_to_json(std::get<pb::Response>(got).status()) << '\n';
      return exit_ok;
    };
  });

  auto* resubmit = app.add_subcommand(
    "resubmit", "Submit a tree that ended ROLLEDBACK again, with the same type, args and "
                "priority, under a new id linked to the old one; prints the new id");
  resubmit->add_option("id", *id, "The ROLLEDBACK root's id")->required();
  resubmit->callback([id, run] {
    *run = [id](const caller& call) {
      pb::Request req;
      req.mutable_resubmit()->set_id(*id);
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      const auto& r = std::get<pb::Response>(got);
      if (!r.text().empty())
        std::cerr << r.text() << '\n';  // resubmitted already: the same id
      std::cout << r.id() << '\n';
      return exit_ok;
    };
  });
}

}  // namespace proctor::cli
