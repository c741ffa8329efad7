// `proctor audit [--since T] [--limit N] [--json]`: the acts the node audited, with who asked
// (docs/security.md, "Audit"); `proctor tls reload`: the node reads its TLS files and its
// policy again, as on SIGHUP.
#include <cstdio>
#include <iostream>
#include <memory>

#include "actors/wire/json/views_json.hpp"
#include "actors/wire/wall_clock.hpp"
#include "apps/cli_operators.hpp"

namespace proctor::cli {

namespace {

std::string audit_text(const google::protobuf::RepeatedPtrField<pb::AuditEntry>& xs) {
  if (xs.empty())
    return "no acts audited in that time\n";
  std::string out;
  char line[128];
  std::snprintf(line, sizeof line, "%-20s %-24s %-22s %-8s %s\n", "AT (UTC)", "WHO", "ACT", "PROC",
                "OUTCOME / DETAIL");
  out += line;
  for (const auto& e : xs) {
    std::snprintf(line, sizeof line, "%-20s %-24s %-22s %-8s ", utc_text(e.at_ms()).c_str(),
                  e.who().c_str(), e.act().c_str(),
                  e.proc_id() != 0 ? std::to_string(e.proc_id()).c_str() : "-");
    out += line;
    out += e.outcome().empty() ? std::string{"not answered (the node stopped)"} : e.outcome();
    if (!e.address().empty())
      out += "  from " + e.address();
    if (!e.detail().empty())
      out += "  " + e.detail();
    out += "\n";
  }
  return out;
}

}  // namespace

void add_security_commands(CLI::App& app, runner* run) {
  struct args {
    std::string since;
    uint32_t limit = 0;
    bool json = false;
  };
  auto a = std::make_shared<args>();
  auto* audit = app.add_subcommand(
    "audit", "Print the acts the node audited, oldest first: who asked (client, token, node), "
             "from where, what, and its outcome (needs the operator role)");
  audit->add_option("--since", a->since,
                    "Acts from then on: a time (2026-12-01T10:00:00Z) or a period back (15m, "
                    "2h; default: all kept)");
  audit->add_option("--limit", a->limit, "The newest N of them (default 1000)");
  audit->add_flag("--json", a->json, "One JSON array");
  audit->callback([a, run] {
    *run = [a](const caller& call) {
      pb::Request req;
      auto* q = req.mutable_audit();
      q->set_limit(a->limit);
      if (!a->since.empty()) {
        if (auto ms = parse_utc(a->since))
          q->set_since_ms(*ms);
        else if (auto back = parse_period(a->since))
          q->set_since_ms(wall_ms() - static_cast<int64_t>(*back));
        else {
          std::cerr << "proctor: --since wants a time (2026-12-01T10:00:00Z) or a period back "
                       "(15m, 2h), got '"
                    << a->since << "'\n";
          return exit_error;
        }
      }
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      const auto& r = std::get<pb::Response>(got);
      std::cout << (a->json ? audit_to_json(r.audit()) + "\n" : audit_text(r.audit()));
      return exit_ok;
    };
  });

  auto* tls = app.add_subcommand("tls", "The node's TLS files");
  auto* reload = tls->add_subcommand(
    "reload", "The node reads its --tls-cert, --tls-key, --tls-ca and --auth-policy again, as "
              "on SIGHUP: new connections use them (needs the admin role)");
  tls->require_subcommand(1);
  reload->callback([run] {
    *run = [](const caller& call) {
      pb::Request req;
      req.mutable_tls_reload();
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      std::cout << std::get<pb::Response>(got).text() << "\n";
      return exit_ok;
    };
  });
}

}  // namespace proctor::cli
