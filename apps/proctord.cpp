// proctord: one Proctor node with the demo types (procedures/demo.hpp) and the demo.echo
// service. Runs until SIGTERM/SIGINT (graceful) or SIGKILL; after any of them, a restart on
// the same data directory carries every procedure on. An author's node is the same call with
// the author's types (include/proctor/run_node.hpp).
#include <proctor/run_node.hpp>

#include "actors/node/echo_service.hpp"
#include "procedures/demo.hpp"

int main(int argc, char** argv) {
  proctor::registry types;
  proctor::register_demo_procedures(types);
  proctor::run_node_options opts;
  opts.services["demo.echo"] = proctor::spawn_echo_service;
  return proctor::run_node(argc, argv, types, opts);
}
