// The certificate, key and CA a node uses (docs/security.md, "Certificates rotated without a
// restart"): copies of the files it was given, in a private directory of its own, replaced
// only by a reload (SIGHUP) that found the new files good. CAF's OpenSSL module reads its
// files again for each connection, and a node's calls to others and its Raft ports make
// their contexts from these copies: so a reload takes effect for new connections at once,
// connections already open run on, and a file written badly meanwhile changes nothing.
// No CAF here.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "tls/tls_options.hpp"

namespace proctor {

/// An SSL_CTX replaced whole on a reload: each new connection takes the current one.
struct tls_context_slot {
  std::atomic<std::shared_ptr<ssl_ctx_st>> current;
};

class tls_in_use {
public:
  /// Copies the files of `given` (check_tls_options passed) into a new private directory
  /// (mode 0700, under $TMPDIR or /tmp); nullptr and `*why` if that fails.
  static std::unique_ptr<tls_in_use> make(const tls_options& given, std::string* why);
  ~tls_in_use();  ///< removes the directory
  tls_in_use(const tls_in_use&) = delete;
  tls_in_use& operator=(const tls_in_use&) = delete;

  /// The copies' paths, for the actor system, the calls to other nodes and the Raft ports.
  const tls_options& options() const noexcept { return in_use_; }
  /// The files as given (their paths, read again by each reload()).
  const tls_options& given() const noexcept { return given_; }
  /// A context of the copies, replaced by each reload (for the Raft ports).
  std::shared_ptr<tls_context_slot> context() const noexcept { return context_; }

  /// Reads the given files (again). They are taken when check_tls_options and `check` (run on
  /// their copies before they are used: the node's own name, say) find nothing wrong: the
  /// copies and the context are replaced, and "" is returned; otherwise one line saying why,
  /// and nothing changes.
  std::string reload(const std::function<std::string(const tls_options&)>& check);

private:
  tls_in_use() = default;

  tls_options given_;
  tls_options in_use_;  ///< dir_/current/{cert,key,ca}.pem (current: a symlink)
  std::string dir_;
  unsigned version_ = 0;
  std::shared_ptr<tls_context_slot> context_ = std::make_shared<tls_context_slot>();
};

}  // namespace proctor
