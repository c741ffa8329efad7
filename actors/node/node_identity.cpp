#include "actors/node/node_identity.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "tls/cert_identity.hpp"

namespace proctor {

uint16_t node_number_of(const std::string& name) {
  uint32_t h = 2166136261u;
  for (unsigned char c : name) {
    h ^= c;
    h *= 16777619u;
  }
  return static_cast<uint16_t>(h % 4095 + 1);
}

namespace {

caf::error fail(std::string msg) {
  return caf::make_error(caf::sec::runtime_error, std::move(msg));
}

/// Writes `text` to `path` so that a crash leaves the old file or the new one, never half.
bool write_durably(const std::string& dir, const std::string& path, const std::string& text) {
  auto tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return false;
  bool ok =
    ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0)
    return false;
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return false;
  ok = ::fsync(dfd) == 0;
  ::close(dfd);
  return ok;
}

}  // namespace

caf::expected<node_identity> stored_identity(const std::string& data_dir,
                                             const std::string& requested) {
  if (!requested.empty() && !valid_name(requested))
    return fail("node name '" + requested + "' is not valid (" + std::string{valid_name_rule}
                + ")");
  auto path = data_dir + "/NODE";
  node_identity stored;
  std::ifstream in(path);
  if (in) {
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("name=", 0) == 0)
        stored.name = line.substr(5);
      else if (line.rfind("number=", 0) == 0)
        stored.number = static_cast<uint16_t>(std::stoul(line.substr(7)));
    }
    if (stored.name.empty() || stored.number == 0)
      return fail(path + " is damaged (expected name=... and number=...); not starting");
  }
  if (!stored.name.empty() && !requested.empty() && requested != stored.name)
    return fail("the data directory " + data_dir + " belongs to node '" + stored.name + "', not '"
                + requested + "' (a node's name is fixed by its data directory)");
  return stored;
}

caf::expected<node_identity> settle_identity(const std::string& data_dir,
                                             const std::string& requested) {
  auto stored = stored_identity(data_dir, requested);
  if (!stored || !stored->name.empty())
    return stored;
  if (requested.empty())
    return node_identity{};
  node_identity id{requested, node_number_of(requested)};
  auto path = data_dir + "/NODE";
  std::ostringstream text;
  text << "name=" << id.name << "\nnumber=" << id.number << "\n";
  if (!write_durably(data_dir, path, text.str()))
    return fail("cannot write " + path);
  return id;
}

}  // namespace proctor
