// example.release: a release of a few files, staged by children, checked, then published.
//
// It shows what a typical procedure does: a step with an undo (stage), children that undo
// their own effects and report what they did (write_file, its WriteResult), a check that
// fails the whole tree (verify), a wait for an external event with a state of its own for
// when it does not come (the approval), a durable timer (the soak), a point of no return
// (publish), and policies declared at registration (register_release).
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <proctor/registry.hpp>
#include <proctor/state_machine.hpp>

#include "release.pb.h"

namespace release {

namespace fs = std::filesystem;

/// Writes one file; its undo removes it. Spawned by example.release only.
class write_file : public proctor::state_machine<WriteData, WriteState> {
public:
  write_file() { on(WRITE_FILE, &write_file::write, &write_file::remove); }

private:
  proctor::outcome write(WriteData& d, proctor::context&) {
    // Written aside, then renamed: a crash mid-write never leaves half a file at the path,
    // and running the step again overwrites the aside copy.
    auto aside = d.path() + ".part";
    std::ofstream(aside, std::ios::trunc) << d.content();
    fs::rename(aside, d.path());
    WriteResult r;  // what the parent reads: ctx.children()[i].result<WriteResult>()
    r.set_path(d.path());
    r.set_bytes(static_cast<int64_t>(fs::file_size(d.path())));
    return done(r);
  }

  void remove(WriteData& d, proctor::context&) {
    fs::remove(d.path());  // nothing to remove is fine
    fs::remove(d.path() + ".part");
  }
};

class release_procedure : public proctor::state_machine<ReleaseData, ReleaseState> {
public:
  release_procedure() {
    on(RELEASE_STAGE, &release_procedure::stage, &release_procedure::unstage);
    // The children undo their own files; the spawn step itself has nothing to undo.
    on(RELEASE_WRITE, &release_procedure::write, &release_procedure::nothing);
    nonblocking(RELEASE_WRITE);  // it only lists the children: runs on the actor, not a worker
    on(RELEASE_VERIFY, &release_procedure::verify, &release_procedure::nothing);
    on_no_rollback(RELEASE_PUBLISH, &release_procedure::publish);  // point of no return
    on(RELEASE_EXPIRED, &release_procedure::expired, &release_procedure::nothing);
  }

  std::string validate() const override {
    const auto& d = typed_data();
    if (d.dir().empty() || d.name().empty() || d.files().empty())
      return "dir, name and files are required";
    if (!plain(d.name()))
      return "name must be a plain file name";
    for (const auto& f : d.files())
      if (!plain(f.name()))
        return "a file's name must be a plain file name";
    return {};
  }

  /// Two releases of one name never run at once.
  proctor::lock_set locks() const override {
    return {proctor::resource_lock::exclusive_on("release/" + typed_data().name())};
  }

private:
  static bool plain(const std::string& name) {
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
  }

  static fs::path staging(const ReleaseData& d) {
    return fs::path(d.dir()) / (d.name() + ".staging");
  }

  proctor::outcome stage(ReleaseData& d, proctor::context&) {
    if (fs::exists(fs::path(d.dir()) / d.name()))
      return fail("release " + d.name() + " exists");  // a business failure: rolls back
    fs::create_directories(staging(d));                // already there after a crash: fine
    return next(RELEASE_WRITE);
  }

  void unstage(ReleaseData& d, proctor::context&) { fs::remove_all(staging(d)); }

  proctor::outcome write(ReleaseData& d, proctor::context&) {
    std::vector<proctor::child_spec> children;
    for (const auto& f : d.files()) {
      WriteData w;
      w.set_path((staging(d) / f.name()).string());
      w.set_content(f.content());
      auto c = proctor::child("example.write_file", w);
      if (!d.writers_on().empty())
        c = std::move(c).on_node(d.writers_on());  // undone there too, if the release fails
      children.push_back(std::move(c));
    }
    return spawn(std::move(children), RELEASE_VERIFY);  // VERIFY runs once all ended
  }

  proctor::outcome verify(ReleaseData& d, proctor::context& ctx) {
    int64_t bytes = 0;
    for (const auto& c : ctx.children())  // the write_file children, as they ended
      bytes += c.result<WriteResult>().bytes();
    if (d.max_bytes() > 0 && bytes > d.max_bytes())
      return fail(std::to_string(bytes) + " bytes, more than max_bytes");  // all undone
    if (d.approval_timeout_ms() > 0)  // publish once approved; undo all if not in time
      return suspend("approve:" + d.name(), RELEASE_PUBLISH,
                     std::chrono::milliseconds{d.approval_timeout_ms()})
        .on_timeout(RELEASE_EXPIRED);
    if (d.soak_ms() > 0)
      return wait(std::chrono::milliseconds{d.soak_ms()}, RELEASE_PUBLISH);  // durable
    return next(RELEASE_PUBLISH);
  }

  proctor::outcome publish(ReleaseData& d, proctor::context&) {
    // No staging directory any more: a crash came after the rename, which is done.
    if (fs::exists(staging(d)))
      fs::rename(staging(d), fs::path(d.dir()) / d.name());
    return done(R"({"published":")" + (fs::path(d.dir()) / d.name()).string() + R"("})");
  }

  proctor::outcome expired(ReleaseData& d, proctor::context&) {
    return fail("release " + d.name() + " was not approved within "
                + std::to_string(d.approval_timeout_ms()) + " ms");
  }

  void nothing(ReleaseData&, proctor::context&) {}
};

/// At node start-up, and in tests. Policies are declared on the registration.
inline void register_release(proctor::registry& types) {
  using namespace std::chrono_literals;
  // A crashed child is restarted alone, 5 times a minute at most; a child placed on a node
  // that stays unreachable for 30 s fails the release.
  types.add<release_procedure>("example.release")
    .supervision({.strategy = proctor::restart_strategy::one_for_one, .max_restarts = 5})
    .on_node_loss(proctor::node_loss_policy::fail_after(30s));
  // A step that fails is tried 3 times in all, 50 ms then 100 ms apart.
  types.add<write_file>("example.write_file")
    .child_only()
    .retry({.kind = proctor::retry_policy::backoff::exponential, .delay = 50ms, .max_attempts = 3});
}

}  // namespace release
