// example.copy_file: copies a file by staging a copy beside its destination, then renaming it.
#pragma once

#include <filesystem>
#include <string>

#include <proctor/registry.hpp>
#include <proctor/state_machine.hpp>

#include "copy_file.pb.h"

namespace example {

class copy_file : public proctor::state_machine<CopyData, CopyState> {
public:
  copy_file() {
    on(COPY_STAGE, &copy_file::stage, &copy_file::unstage);  // lowest state runs first
    on_no_rollback(COPY_PUBLISH, &copy_file::publish);       // point of no return
  }

  // Checked after the submit's args JSON is parsed into CopyData; "" accepts.
  std::string validate() const override {
    const auto& d = typed_data();
    return d.src().empty() || d.dst().empty() ? "src and dst are required" : "";
  }

private:
  // Named after the procedure, so that a step run again after a crash finds its own copy.
  static std::filesystem::path staged(const CopyData& d, const proctor::context& ctx) {
    return d.dst() + ".staged-" + std::to_string(ctx.id());
  }

  proctor::outcome stage(CopyData& d, proctor::context& ctx) {
    if (!std::filesystem::exists(d.src()))
      return fail("no such file: " + d.src());  // a business failure: the tree rolls back
    // Overwrites what a crash mid-copy left: running the step again is harmless.
    std::filesystem::copy_file(d.src(), staged(d, ctx),
                               std::filesystem::copy_options::overwrite_existing);
    return next(COPY_PUBLISH);
  }

  void unstage(CopyData& d, proctor::context& ctx) {
    std::filesystem::remove(staged(d, ctx));  // nothing to remove is fine
  }

  proctor::outcome publish(CopyData& d, proctor::context& ctx) {
    // Nothing staged any more: a crash came after the rename, which is done.
    if (std::filesystem::exists(staged(d, ctx)))
      std::filesystem::rename(staged(d, ctx), d.dst());
    return done(R"({"copied":true})");
  }
};

// At node start-up, beside register_demo_procedures.
inline void register_copy_file(proctor::registry& types) {
  types.add<copy_file>("example.copy_file", /*version=*/1);
}

}  // namespace example
