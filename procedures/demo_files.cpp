// The demo procedures' file helpers and naps (internal/demo_files.hpp).
#include "procedures/internal/demo_files.hpp"

namespace proctor::demo_detail {

/// Creates `path` if missing (idempotent); throws on I/O errors (a crash: retried).
void touch(const fs::path& path) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot create " + path.string() + ": " + std::strerror(errno));
  ::close(fd);
}

/// Appends `line` and a newline to `path`, creating it (one write(2) with O_APPEND: whole
/// lines, also from several processes); throws on I/O errors (a crash: retried).
void append_line(const fs::path& path, std::string line) {
  line += '\n';
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot create " + path.string() + ": " + std::strerror(errno));
  auto n = ::write(fd, line.data(), line.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("cannot append to " + path.string() + ": "
                             + (n < 0 ? std::strerror(err) : "a short write"));
}

/// Removes `path` if present (idempotent).
void remove_file(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec)
    throw std::runtime_error("cannot remove " + path.string() + ": " + ec.message());
}

/// "" if `dir` is a directory, else why not (never throws: args come from clients).
std::string check_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    return {};
  bool unusual = ec && ec != std::errc::no_such_file_or_directory;
  return "ledger_dir '" + dir + "' is not a directory" + (unusual ? " (" + ec.message() + ")" : "");
}

void nap(int ms) {
  if (ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds{ms});
}

/// Sleeps `ms` in slices of at most 10 ms; false, at once, when the step is no longer wanted
/// (ctx.cancelled(): a cancelled sibling, a stopped subtree).
bool nap_unless_cancelled(int ms, const context& ctx) {
  using namespace std::chrono;
  const auto until = steady_clock::now() + milliseconds{ms};
  while (!ctx.cancelled()) {
    auto left = until - steady_clock::now();
    if (left <= steady_clock::duration::zero())
      return true;
    std::this_thread::sleep_for(std::min<steady_clock::duration>(left, milliseconds{10}));
  }
  return false;
}

/// True when `gate_dir` is "" or holds the file `name`: demo.ledger's gates (see demo.proto).
bool gate_open(const std::string& gate_dir, const std::string& name) {
  return gate_dir.empty() || fs::exists(fs::path(gate_dir) / name);
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

}  // namespace proctor::demo_detail
