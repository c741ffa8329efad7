// Type versions and upgrades of journaled data; child-only types.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include <proctor/demo.pb.h>
#include <proctor/registry.hpp>
#include <proctor/state_machine.hpp>

namespace proctor {
namespace {

class counter : public state_machine<pb::NoopData, pb::NoopState> {
public:
  counter() {
    on(
      pb::NOOP_STEP, [](pb::NoopData&, context&) { return outcome::done(); },
      [](pb::NoopData&, context&) {});
  }
};

std::string noop_bytes(int steps, int step) {
  pb::NoopData d;
  d.set_steps(steps);
  d.set_step(step);
  return d.SerializeAsString();
}

const pb::NoopData& data_of(procedure& p) {
  return dynamic_cast<pb::NoopData&>(p.data());
}

/// Version 3 of "t.counter": version 1 counted steps in tens, version 2 numbered from 0.
registry three_versions() {
  registry r;
  bool ok = static_cast<bool>(r.add<counter>("t.counter", 3)
                                .upgrade(1,
                                         [](const std::string& v1) {
                                           pb::NoopData d;
                                           if (!d.ParseFromString(v1))
                                             throw std::runtime_error("not v1 data");
                                           d.set_steps(d.steps() * 10);
                                           return d.SerializeAsString();
                                         })
                                .upgrade(2, [](pb::NoopData& d) { d.set_step(d.step() + 1); }));
  EXPECT_TRUE(ok);
  return r;
}

TEST(registry_versions_test, the_current_version_loads_unchanged) {
  auto r = three_versions();
  std::string err;
  for (uint32_t v : {0u, 3u}) {
    auto p = r.make_from_journal("t.counter", v, noop_bytes(2, 5), &err);
    ASSERT_NE(p, nullptr) << err;
    EXPECT_EQ(data_of(*p).steps(), 2);
    EXPECT_EQ(data_of(*p).step(), 5);
  }
}

TEST(registry_versions_test, older_data_is_upgraded_step_by_step) {
  auto r = three_versions();
  std::string err;
  auto p1 = r.make_from_journal("t.counter", 1, noop_bytes(2, 5), &err);
  ASSERT_NE(p1, nullptr) << err;
  EXPECT_EQ(data_of(*p1).steps(), 20);  // 1 -> 2
  EXPECT_EQ(data_of(*p1).step(), 6);    // 2 -> 3
  auto p2 = r.make_from_journal("t.counter", 2, noop_bytes(2, 5), &err);
  ASSERT_NE(p2, nullptr) << err;
  EXPECT_EQ(data_of(*p2).steps(), 2);
  EXPECT_EQ(data_of(*p2).step(), 6);
}

TEST(registry_versions_test, newer_data_is_refused) {
  auto r = three_versions();
  std::string err;
  EXPECT_EQ(r.make_from_journal("t.counter", 4, noop_bytes(2, 5), &err), nullptr);
  EXPECT_EQ(err, "data of 't.counter' was written by version 4; this node knows version 3 "
                 "(no downgrade)");
  EXPECT_EQ(r.version_problem(*r.find("t.counter"), 4),
            "written by version 4; this node knows version 3 (no downgrade)");
}

TEST(registry_versions_test, a_gap_in_the_upgrades_is_refused) {
  registry r;
  ASSERT_TRUE(r.add<counter>("t.counter", 3).upgrade(2, [](pb::NoopData&) {}));
  std::string err;
  EXPECT_EQ(r.make_from_journal("t.counter", 1, noop_bytes(1, 1), &err), nullptr);
  EXPECT_EQ(err, "data of 't.counter' was written by version 1; this node knows version 3 and "
                 "has no upgrade from version 1 to 2");
  EXPECT_EQ(r.version_problem(*r.find("t.counter"), 2), "");
  EXPECT_NE(r.make_from_journal("t.counter", 2, noop_bytes(1, 1), &err), nullptr) << err;
}

TEST(registry_versions_test, an_upgrade_that_throws_fails_the_load) {
  registry r;
  ASSERT_TRUE(r.add<counter>("t.counter", 2).upgrade(1, [](pb::NoopData& d) {
    if (d.steps() < 0)
      throw std::runtime_error("negative steps\ncannot be upgraded");
  }));
  std::string err;
  EXPECT_EQ(r.make_from_journal("t.counter", 1, noop_bytes(-1, 0), &err), nullptr);
  EXPECT_EQ(err, "upgrade of 't.counter' data from version 1 to 2 failed: negative steps "
                 "cannot be upgraded");
  // Bytes the in-place form cannot parse fail it too.
  EXPECT_EQ(r.make_from_journal("t.counter", 1, std::string("\xff\xff\xff", 3), &err), nullptr);
  EXPECT_EQ(err, "upgrade of 't.counter' data from version 1 to 2 failed: unparsable data");
  // And so do bytes an upgrade returns that do not parse.
  registry r2;
  ASSERT_TRUE(r2.add<counter>("t.counter", 2).upgrade(1, [](const std::string&) {
    return std::string("\xff\xff\xff", 3);
  }));
  EXPECT_EQ(r2.make_from_journal("t.counter", 1, noop_bytes(1, 1), &err), nullptr);
  EXPECT_EQ(err, "unparsable data for 't.counter' (after the upgrade from version 1)");
}

TEST(registry_versions_test, an_unknown_type_is_named) {
  auto r = three_versions();
  std::string err;
  EXPECT_EQ(r.make_from_journal("t.countr", 1, "", &err), nullptr);
  EXPECT_EQ(err, "unknown procedure type 't.countr' (did you mean 't.counter'?)");
}

TEST(registry_versions_test, upgrades_that_cannot_apply_are_refused_at_registration) {
  registry r;
  auto decl = r.add<counter>("t.counter", 3);
  ASSERT_TRUE(decl);
  auto noop = [](pb::NoopData&) {};
  EXPECT_THROW(decl.upgrade(0, noop), std::invalid_argument);
  EXPECT_THROW(decl.upgrade(3, noop), std::invalid_argument);
  EXPECT_THROW(decl.upgrade(7, noop), std::invalid_argument);
  decl.upgrade(1, noop);
  EXPECT_THROW(decl.upgrade(1, noop), std::invalid_argument);
  // An upgrade of another message than the type's data.
  EXPECT_THROW(decl.upgrade(2, [](pb::LedgerData&) {}), std::invalid_argument);
  try {
    decl.upgrade(0, noop);
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "upgrade from version 0 of 't.counter': upgrades go from an older "
                           "version (1 to 2) to the next; the registered version is 3");
  }
}

TEST(registry_versions_test, a_taken_name_throws_and_declares_nothing) {
  registry r;
  ASSERT_TRUE(r.add<counter>("t.counter", 2));
  // The upgrade and the flag chained on the second add are never declared: it throws first.
  EXPECT_THROW(r.add<counter>("t.counter", 5).upgrade(1, [](pb::NoopData&) {}).child_only(),
               std::logic_error);
  EXPECT_EQ(r.find("t.counter")->version, 2u);
  EXPECT_TRUE(r.find("t.counter")->upgrades.empty());
  EXPECT_FALSE(r.find("t.counter")->child_only);
  // Version 0 is not a version: it means "the submitted one" in the journal.
  try {
    r.add<counter>("t.zero", 0);
    ADD_FAILURE() << "version 0 did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'t.zero' registered with version 0"), std::string::npos)
      << e.what();
  }
  EXPECT_EQ(r.find("t.zero"), nullptr);
}

TEST(registry_versions_test, child_only_is_declared_with_the_type) {
  registry r;
  ASSERT_TRUE(r.add<counter>("t.child").child_only());
  ASSERT_TRUE(r.add<counter>("t.root"));
  EXPECT_TRUE(r.find("t.child")->child_only);
  EXPECT_FALSE(r.find("t.root")->child_only);
}

}  // namespace
}  // namespace proctor
