#include "tls/tls_in_use.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <openssl/ssl.h>

namespace proctor {

namespace {

namespace fs = std::filesystem;

/// `from`'s bytes into `to` (mode 0600), or why not.
std::string copy_file(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in)
    return "cannot read " + from + ": " + std::strerror(errno);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  {
    std::ofstream out(to, std::ios::binary | std::ios::trunc);
    out << bytes.str();
    if (!out)
      return "cannot write " + to + ": " + std::strerror(errno);
  }
  std::error_code ec;
  fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write, ec);
  return {};
}

}  // namespace

std::unique_ptr<tls_in_use> tls_in_use::make(const tls_options& given, std::string* why) {
  std::unique_ptr<tls_in_use> t{new tls_in_use};
  t->given_ = given;
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
    std::string{tmp != nullptr && *tmp != '\0' ? tmp : "/tmp"} + "/proctord-tls-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    *why = "cannot make a private directory for the TLS files (" + pattern
           + "): " + std::strerror(errno);
    return nullptr;
  }
  t->dir_ = pattern;
  t->in_use_ = {t->dir_ + "/current/cert.pem", t->dir_ + "/current/key.pem",
                t->dir_ + "/current/ca.pem", given.check_host};
  *why = t->reload([](const tls_options&) { return std::string{}; });
  if (!why->empty())
    return nullptr;
  return t;
}

tls_in_use::~tls_in_use() {
  std::error_code ec;
  if (!dir_.empty())
    fs::remove_all(dir_, ec);
}

// The given files copied into a new version directory, checked there, and made current.
std::string tls_in_use::reload(const std::function<std::string(const tls_options&)>& check) {
  if (auto bad = check_tls_options(given_); !bad.empty())
    return bad;
  const std::string version = "v" + std::to_string(++version_);
  const std::string vdir = dir_ + "/" + version;
  std::error_code ec;
  fs::remove_all(vdir, ec);
  if (!fs::create_directory(vdir, ec))
    return "cannot make " + vdir + ": " + ec.message();
  const tls_options copies{vdir + "/cert.pem", vdir + "/key.pem", vdir + "/ca.pem"};
  for (auto [from, to] : {std::pair{&given_.cert, &copies.cert},
                          std::pair{&given_.key, &copies.key}, std::pair{&given_.ca, &copies.ca}})
    if (auto bad = copy_file(*from, *to); !bad.empty()) {
      fs::remove_all(vdir, ec);
      return bad;
    }
  // The copies are checked, not the files given: those may change again meanwhile.
  std::string bad = check_tls_options(copies);
  if (bad.empty())
    bad = check(copies);
  std::string ctx_why;
  ssl_ctx_st* ctx = bad.empty() ? make_tls_context(copies, &ctx_why) : nullptr;
  if (bad.empty() && ctx == nullptr)
    bad = ctx_why;
  if (!bad.empty()) {
    fs::remove_all(vdir, ec);
    // Named as the operator gave them, not as the copies.
    for (auto [copy, path] :
         {std::pair{&copies.cert, &given_.cert}, std::pair{&copies.key, &given_.key},
          std::pair{&copies.ca, &given_.ca}})
      for (auto at = bad.find(*copy); at != std::string::npos;
           at = bad.find(*copy, at + path->size()))
        bad.replace(at, copy->size(), *path);
    return bad;
  }
  // current -> vN, swapped in one rename: a connection opening the three files meanwhile
  // reads the old ones or the new ones.
  const std::string link = dir_ + "/current";
  const std::string next = dir_ + "/current." + version;
  fs::remove(next, ec);
  fs::create_directory_symlink(version, next, ec);
  if (ec || ::rename(next.c_str(), link.c_str()) != 0) {
    SSL_CTX_free(ctx);
    fs::remove_all(vdir, ec);
    return "cannot make " + link + " the files in use: " + std::strerror(errno);
  }
  context_->current.store(std::shared_ptr<ssl_ctx_st>(ctx, SSL_CTX_free));
  // The versions before the previous one: nothing opens them any more (a connection that
  // resolved `current` just before it moved may still open the previous one's files).
  for (unsigned v = 1; v + 1 < version_; ++v)
    fs::remove_all(dir_ + "/v" + std::to_string(v), ec);
  return {};
}

}  // namespace proctor
