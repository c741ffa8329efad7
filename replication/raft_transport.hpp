// libraft's TCP transport with TCP_NODELAY on every stream. raft_uv_tcp leaves Nagle's
// algorithm on, and with several entries in flight a small AppendEntries (or its result)
// then waits for the previous segment's ACK: 211-399 entries/s against 4,986-6,720 with
// TCP_NODELAY (LIBRAFT-0.15-NOTES.md). This wraps raft_uv_tcp: its accept and connect
// callbacks set TCP_NODELAY on the stream before handing it to libraft.
//
// Threading: the Raft loop thread only, like every libuv object.
#pragma once

#include <string>

#include "replication/raft_c.hpp"

namespace proctor {

/// A member's address as libraft stores it may carry a label after '#'
/// (raft_store_impl::config_address): a transport connects to, and listens on, the address
/// alone. Both transports (this one and raft_tls_transport.hpp) use it.
inline std::string raft_transport_address(const char* stored) {
  std::string s = stored != nullptr ? stored : "";
  return s.substr(0, s.find('#'));
}

struct nodelay_transport {
  struct raft_uv_transport outer;  ///< what raft_uv_init is given
  struct raft_uv_transport inner;  ///< raft_uv_tcp
  raft_uv_accept_cb accept_cb = nullptr;
  raft_uv_transport_close_cb close_cb = nullptr;
  char address[128] = {};  ///< ours, for error messages
};

/// Initializes `t` on `loop` (0, or a libraft error code).
int nodelay_transport_init(nodelay_transport* t, struct uv_loop_s* loop);

/// Releases `t`'s memory, once libraft has closed it (after raft_close's callback).
void nodelay_transport_close(nodelay_transport* t);

}  // namespace proctor
