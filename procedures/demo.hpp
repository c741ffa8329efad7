// The built-in demo procedures, used by the demo, the tests and the benchmark:
//   demo.ledger      steps that each leave one file (a line "<pid> <ms the step began>" per run
//                    of the step); trees; a failing root (rollback)
//   demo.ledger.impatient  demo.ledger whose tree fails after 5 s without a child's node
//   demo.flaky       a step that crashes its first `crash_times` attempts (supervision)
//   demo.wait_event  suspends until an external event or its deadline
//   demo.noop        `steps` empty steps (durable step throughput)
//   demo.call        sends `request` to a service and ends with its reply
//   demo.fanout      one root spawning `children` demo.noop children (wide trees)
#pragma once

#include <proctor/registry.hpp>

namespace proctor {

/// Registers every demo procedure type in `r`.
void register_demo_procedures(registry& r);

}  // namespace proctor
