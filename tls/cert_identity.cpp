#include "tls/cert_identity.hpp"

#include <cstdio>
#include <memory>
#include <vector>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

namespace proctor {

namespace {

constexpr std::string_view scheme = "proctor://";

/// `s` split at '/'.
std::vector<std::string_view> segments(std::string_view s) {
  std::vector<std::string_view> out;
  size_t from = 0;
  while (true) {
    auto at = s.find('/', from);
    out.push_back(
      s.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from));
    if (at == std::string_view::npos)
      return out;
    from = at + 1;
  }
}

cert_identity anonymous(std::string* why, std::string text) {
  *why = std::move(text);
  return {};
}

}  // namespace

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64)
    return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'
              || c == '_' || c == '.';
    if (!ok)
      return false;
  }
  return true;
}

std::string printable(std::string_view text, size_t max) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size() && i < max; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  if (text.size() > max)
    out += "...";
  return out;
}

std::string cert_identity::text() const {
  switch (what) {
    case kind::node:
      return "node " + name + (replica.empty() ? "" : " (replica " + replica + ")");
    case kind::client:
      return "client " + name;
    case kind::anonymous:
      break;
  }
  return "a certificate naming no proctor identity";
}

cert_identity parse_identity_uri(std::string_view uri, std::string* why) {
  why->clear();
  if (uri.substr(0, scheme.size()) != scheme)
    return {};
  const std::string shown = printable(uri);
  auto parts = segments(uri.substr(scheme.size()));
  for (auto p : parts)
    if (!valid_name(p))
      return anonymous(why, "'" + shown
                              + "' is not a proctor identity (names are 1-64 letters, "
                                "digits, '-', '_', '.')");
  cert_identity id;
  if (parts.size() == 2 && parts[0] == "client") {
    id.what = cert_identity::kind::client;
  } else if (parts[0] == "node"
             && (parts.size() == 2 || (parts.size() == 4 && parts[2] == "replica"))) {
    id.what = cert_identity::kind::node;
    if (parts.size() == 4)
      id.replica = parts[3];
  } else {
    return anonymous(why, "'" + shown
                            + "' is not proctor://node/NAME, "
                              "proctor://node/NAME/replica/R or proctor://client/NAME");
  }
  id.name = parts[1];
  return id;
}

cert_identity identity_of(const x509_st* cert, std::string* why) {
  why->clear();
  if (cert == nullptr)
    return anonymous(why, "no certificate");
  using names_ptr = std::unique_ptr<GENERAL_NAMES, decltype(&GENERAL_NAMES_free)>;
  names_ptr names{
    static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)),
    &GENERAL_NAMES_free};
  if (!names)
    return {};
  cert_identity out;
  bool any = false;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    if (n->type != GEN_URI)
      continue;
    const auto* s = n->d.uniformResourceIdentifier;
    std::string_view uri{reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                         static_cast<size_t>(ASN1_STRING_length(s))};
    std::string bad;
    auto id = parse_identity_uri(uri, &bad);
    if (!bad.empty())
      return anonymous(why, bad);
    if (id.what == cert_identity::kind::anonymous)
      continue;  // a URI of another scheme
    if (!any) {
      out = id;
      any = true;
      continue;
    }
    // proctor://node/b and proctor://node/b/replica/b2 make one identity; nothing else does.
    if (out.what != id.what || out.name != id.name || out.what == cert_identity::kind::client
        || (!out.replica.empty() && !id.replica.empty() && out.replica != id.replica))
      return anonymous(why, "it names both " + out.text() + " and " + id.text());
    if (out.replica.empty())
      out.replica = id.replica;
  }
  return out;
}

cert_identity identity_of_file(const std::string& path, std::string* why) {
  std::unique_ptr<FILE, decltype(&std::fclose)> f{std::fopen(path.c_str(), "r"), &std::fclose};
  if (!f)
    return anonymous(why, "cannot read " + path);
  std::unique_ptr<X509, decltype(&X509_free)> cert{
    PEM_read_X509(f.get(), nullptr, nullptr, nullptr), &X509_free};
  if (!cert)
    return anonymous(why, path + " holds no PEM certificate");
  return identity_of(cert.get(), why);
}

std::string check_own_identity(const std::string& cert_path, const std::string& node,
                               const std::string& replica) {
  std::string why;
  auto id = identity_of_file(cert_path, &why);
  const std::string want =
    "proctor://node/" + node + (replica.empty() ? "" : "/replica/" + replica);
  const std::string hint = " (docs/security.md; proctor-certs node DIR " + node
                           + (replica.empty() ? "" : " --replica " + replica) + " issues one)";
  if (!why.empty())
    return "--tls-cert " + cert_path + " does not name this node: " + why + "; it must name " + want
           + hint;
  if (!id.is_node() || id.name != node || (!replica.empty() && id.replica != replica))
    return "--tls-cert " + cert_path + " names " + id.text() + ", not " + want + hint;
  return {};
}

}  // namespace proctor
