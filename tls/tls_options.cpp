#include "tls/tls_options.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace proctor {

namespace {

/// "" if `path` can be opened for reading, else why not.
std::string unreadable(const std::string& option, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr)
    return "cannot read " + option + " " + path + ": " + std::strerror(errno);
  std::fclose(f);
  return {};
}

}  // namespace

std::string tls_error_text(const std::string& fallback) {
  auto e = ERR_peek_last_error();
  ERR_clear_error();
  if (e == 0)
    return fallback;
  if (const char* r = ERR_reason_error_string(e); r != nullptr)
    return r;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

std::string check_tls_options(const tls_options& o) {
  if (!o.enabled())
    return {};
  std::string why;
  auto* ctx = make_tls_context(o, &why);
  if (ctx != nullptr)
    SSL_CTX_free(ctx);
  return why;
}

ssl_ctx_st* make_tls_context(const tls_options& o, std::string* why) {
  const std::pair<const char*, const std::string*> given[] = {
    {"--tls-cert", &o.cert}, {"--tls-key", &o.key}, {"--tls-ca", &o.ca}};
  for (const auto& [option, path] : given) {
    if (path->empty()) {
      *why =
        std::string{"--tls-cert, --tls-key and --tls-ca go together: "} + option + " is missing";
      return nullptr;
    }
  }
  for (const auto& [option, path] : given) {
    if (auto e = unreadable(option, *path); !e.empty()) {
      *why = e;
      return nullptr;
    }
  }
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr) {
    *why = "cannot make a TLS context: " + tls_error_text("out of memory");
    return nullptr;
  }
  auto failed = [&](std::string text) -> ssl_ctx_st* {
    *why = std::move(text) + " (" + tls_error_text("unknown error") + ")";
    SSL_CTX_free(ctx);
    return nullptr;
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, o.cert.c_str()) != 1)
    return failed("--tls-cert " + o.cert + " holds no usable PEM certificate");
  if (SSL_CTX_use_PrivateKey_file(ctx, o.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
      return failed("--tls-key " + o.key + " is not the key of --tls-cert " + o.cert);
    return failed("--tls-key " + o.key + " holds no usable PEM private key (unencrypted)");
  }
  if (SSL_CTX_check_private_key(ctx) != 1)
    return failed("--tls-key " + o.key + " is not the key of --tls-cert " + o.cert);
  if (SSL_CTX_load_verify_locations(ctx, o.ca.c_str(), nullptr) != 1)
    return failed("--tls-ca " + o.ca + " holds no usable PEM CA certificate");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return ctx;
}

}  // namespace proctor
