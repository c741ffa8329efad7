#include "tls/tls_options.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "tls/cert_identity.hpp"

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

/// The SSL object's slot for the text note_refused_certificate fills.
int refused_slot() {
  static const int slot = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return slot;
}

/// "CN=x,O=y" (RFC 2253), or "(none)".
std::string name_text(const X509_NAME* n) {
  if (n == nullptr)
    return "(none)";
  BIO* b = BIO_new(BIO_s_mem());
  if (b == nullptr)
    return "(unknown)";
  X509_NAME_print_ex(b, n, 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long len = BIO_get_mem_data(b, &data);
  std::string out = len > 0 && data != nullptr ? std::string(data, static_cast<size_t>(len))
                                               : std::string{"(empty)"};
  BIO_free(b);
  return out;
}

/// The SSL object's slot for the node name expect_peer_node wants.
int expected_slot() {
  static const int slot = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return slot;
}

/// The host expect_peer_host set on `ssl`, for the refusal's text.
std::string dialled_host(SSL* ssl) {
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (const char* h = X509_VERIFY_PARAM_get0_host(param, 0); h != nullptr)
    return h;
  char* ip = X509_VERIFY_PARAM_get1_ip_asc(param);
  std::string out = ip != nullptr ? ip : "?";
  OPENSSL_free(ip);
  return out;
}

/// OpenSSL's verify callback: keeps its decision, and notes the first certificate refused;
/// refuses the other side's own certificate (depth 0) unless it names the node expected.
int verify_noting(int ok, X509_STORE_CTX* x) {
  auto* ssl =
    static_cast<SSL*>(X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* out =
    ssl != nullptr ? static_cast<std::string*>(SSL_get_ex_data(ssl, refused_slot())) : nullptr;
  const X509* cert = X509_STORE_CTX_get_current_cert(x);
  const auto* node = ssl != nullptr
                       ? static_cast<const std::string*>(SSL_get_ex_data(ssl, expected_slot()))
                       : nullptr;
  if (ok != 0 && node != nullptr && X509_STORE_CTX_get_error_depth(x) == 0) {
    std::string why;
    auto id = identity_of(cert, &why);
    if (id.is_node() && (node->empty() || id.name == *node))
      return ok;
    if (out != nullptr && out->empty())
      *out = name_text(X509_get_subject_name(cert)) + " names "
             + (why.empty() ? id.text() : "nothing usable (" + why + ")") + ", not "
             + (node->empty() ? std::string{"a node"} : "node " + *node);
    X509_STORE_CTX_set_error(x, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
  }
  if (ok != 0)
    return ok;
  if (out != nullptr && out->empty() && cert != nullptr) {
    const int err = X509_STORE_CTX_get_error(x);
    *out = name_text(X509_get_subject_name(cert)) + " issued by "
           + name_text(X509_get_issuer_name(cert)) + ": " + X509_verify_cert_error_string(err);
    if (err == X509_V_ERR_HOSTNAME_MISMATCH || err == X509_V_ERR_IP_ADDRESS_MISMATCH)
      *out += " (--tls-check-host: it does not carry " + dialled_host(ssl) + ", the host dialled)";
  }
  return ok;
}

}  // namespace

void note_refused_certificate(ssl_st* ssl, std::string* out) {
  SSL_set_ex_data(ssl, refused_slot(), out);
  SSL_set_verify(ssl, SSL_get_verify_mode(ssl), verify_noting);
}

void expect_peer_node(ssl_st* ssl, const std::string* node) {
  SSL_set_ex_data(ssl, expected_slot(), const_cast<std::string*>(node));
}

std::string expect_peer_host(ssl_st* ssl, const tls_options& o, const std::string& host) {
  if (!o.check_host || host.empty())
    return {};
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  // An address is matched against the certificate's IP entries: set1_ip_asc takes only
  // an address, so whatever it refuses is a name.
  if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1)
    return {};
  ERR_clear_error();
  // The common name is a person's reading (docs/tls.md): only subjectAltNames count.
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS
                                           | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
  if (X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size()) == 1)
    return {};
  return "--tls-check-host: cannot check host '" + host + "': " + tls_error_text("not a host");
}

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
    return o.check_host ? "--tls-check-host needs --tls-cert, --tls-key and --tls-ca" : "";
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
