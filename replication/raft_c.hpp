// libraft's C headers for C++: Debian's raft.h and raft/uv.h (0.15) declare their functions
// without extern "C", so C++ would look for mangled names. Include this, never them.
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <uv.h>

extern "C" {
#include <raft.h>
#include <raft/uv.h>
}
