// release-node: a Proctor node with the example's types. It takes every option of proctord
// (release-node --help).
#include <proctor/run_node.hpp>

#include "release.hpp"

int main(int argc, char** argv) {
  proctor::registry types;
  release::register_release(types);
  proctor::run_node_options opts;
  opts.program = "release-node";
  return proctor::run_node(argc, argv, types, opts);
}
