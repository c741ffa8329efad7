// A Proctor node as a program: the whole of proctord in one call, with the author's types.
//
//   int main(int argc, char** argv) {
//     proctor::registry types;
//     acme::register_procedures(types);
//     return proctor::run_node(argc, argv, types);
//   }
//
// The program then takes every option of proctord (--data-dir, --listen, --peers,
// --metrics, ...; --help lists them) and behaves as proctord does: it runs until SIGTERM or
// SIGINT (graceful) or SIGKILL, and a restart on the same data directory carries every
// procedure on.
#pragma once

#include <functional>
#include <map>
#include <string>

#include <caf/fwd.hpp>

#include <proctor/registry.hpp>

namespace proctor {

/// What a node program adds to proctord's own behaviour.
struct run_node_options {
  /// The program's name in its messages and its log ("proctord").
  std::string program = "proctord";
  /// The first line of --help.
  std::string description = "a Proctor node (durable procedures on actors, journaled to RocksDB)";
  /// The services procedures call by name (outcome::call): each is spawned once the actor
  /// system runs, before the node recovers, and stopped after the node.
  std::map<std::string, std::function<caf::actor(caf::actor_system&)>> services;
};

/// Parses the command line, runs a node of `types` until SIGTERM or SIGINT and returns the
/// process's exit code: 0 after a graceful stop, 64 for a mistake on the command line (told
/// on stderr). A node that cannot start (its data directory, its port) ends the process
/// with code 1. Blocks SIGTERM and SIGINT in the calling thread: call it from main() before
/// starting threads of one's own.
int run_node(int argc, char** argv, registry& types, const run_node_options& opts = {});

}  // namespace proctor
