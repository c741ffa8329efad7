// libFuzzer target for journal-record decoding: a sequence of records folded by
// tree_folder, then rollback_plan and summarize on the image, plus journal_keys.
//
// Input: root:u8 undo:u8 chunk*, chunk := gap:u8 tag:u8 len:u16le payload[len] (a short last
// chunk takes what is left). Record i gets LSN = LSN(i-1) + 1 + gap, so LSNs ascend as the
// journal guarantees. tag % 4 says what the payload is:
//   0  the record's stored bytes, folded as they are (may not parse)
//   1  a recipe (record_from_recipe): a valid record built from the bytes, stored serialized
//   2  stored bytes that, if they parse, get their procedure ids moved into the tree (root + 0..7)
//   3  a recipe folded as a message, without the serialize/parse round trip
// Tags 1-3 keep mutated inputs inside the tree's procedures, so deep states get explored.
//
// Invariants checked (a failure aborts, which libFuzzer reports as a crash):
//   - rollback_plan: the partly-run states come first, children (higher ids) before parents,
//     one per unfinished procedure; then every committed step not undone and not past the
//     point of no return, strictly descending by LSN.
//   - resuming a rollback: after RollbackStepDone records for the first `undo` items of the
//     plan, the plan of the re-folded tree is exactly the rest of the plan.
//   - records of other trees are ignored by fold_tree.
//   - summarize is a fixed point: the image folded from a summary summarizes to the same.
//   - journal_keys round-trip and order exactly as (root_id, lsn).
//   - compaction is an equivalent rewrite: the records up to a split point, folded into one
//     TreeSnapshot at the last of their LSNs, then the rest, fold to the same tree (same
//     snapshot, rollback plan, undos done and summary) as every record folded.
// PROCTOR_FUZZ_STRICT=1 also requires every recipe record to survive serialize + parse; off
// by default because proto3 `string` fields reject invalid UTF-8 on parse (see the report).
//
// Built with -DPROCTOR_FUZZ_SEEDS_MAIN instead, this file is a tool that writes the seed
// corpus (records built from journal.proto, as the runtime writes them) into a directory.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/message_differencer.h>

#include <proctor/journal.pb.h>

#include "persistence/keys.hpp"
#include "persistence/tree_image.hpp"
#include "persistence/tree_snapshot.hpp"

namespace {

using namespace proctor;

constexpr size_t max_records = 256;
constexpr uint64_t ids_per_tree = 8;

bool strict = false;
// PROCTOR_FUZZ_TRACE=1 prints each record and the plan: for reading a finding, not for fuzzing.
bool trace = false;

[[noreturn]] void fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "journal_record_fuzzer: invariant violated: %s%s%s\n", what,
               detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

/// Like assert, always on; the detail (any further arguments) is built only on failure.
#define REQUIRE(ok, ...) ((ok) ? void() : fail(__VA_ARGS__))

/// Reads the input front to back; past the end every read yields zeros.
class byte_reader {
public:
  byte_reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  size_t left() const { return size_ - pos_; }

  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }

  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }

  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= static_cast<uint64_t>(u8()) << (8 * i);
    return v;
  }

  std::string bytes(size_t n) {
    n = std::min(n, left());
    std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }

  /// A short string: a length byte (mod max + 1), then that many bytes.
  std::string text(size_t max = 16) { return bytes(u8() % (max + 1)); }

private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// -- record recipes -----------------------------------------------------------------------------

/// A procedure id: mostly one of the tree's (root + 0..7), rarely any 64-bit value.
uint64_t recipe_id(byte_reader& in, uint64_t root) {
  auto b = in.u8();
  return b >= 0xF8 ? in.u64() : root + b % ids_per_tree;
}

/// A state: mostly small, rarely any 32-bit value.
int32_t recipe_state(byte_reader& in) {
  auto b = in.u8();
  return b >= 0xF8 ? static_cast<int32_t>(in.u64()) : b % 6;
}

std::string recipe_type(byte_reader& in) {
  static const char* const names[] = {"demo.ledger", "demo.flaky",  "demo.wait_event",
                                      "demo.noop",   "demo.fanout", "demo.call"};
  auto b = in.u8();
  return b >= 0xF8 ? in.text() : names[b % std::size(names)];
}

/// A valid record of the kind the recipe's first byte picks. `lsns` are the LSNs folded so
/// far, so a RollbackStepDone can name one of them.
pb::JournalRecord record_from_recipe(byte_reader& in, uint64_t root,
                                     const std::vector<uint64_t>& lsns) {
  pb::JournalRecord r;
  r.set_format(1);
  switch (in.u8() % 14) {
    case 0: {
      auto* s = r.mutable_submitted();
      s->set_proc_id(recipe_id(in, root));
      s->set_parent_id(s->proc_id() == root ? 0 : recipe_id(in, root));
      s->set_type(recipe_type(in));
      s->set_type_version(1);
      s->set_data(in.text());
      s->set_state(recipe_state(in));
      s->set_nonce(in.text(4));
      s->set_priority(static_cast<int8_t>(in.u8()));
      s->set_submitted_at_ms(static_cast<int64_t>(in.u64()));
      break;
    }
    case 1: {
      auto* s = r.mutable_step();
      s->set_proc_id(recipe_id(in, root));
      s->set_executed_state(recipe_state(in));
      s->set_next_state(recipe_state(in));
      s->set_data(in.text());
      for (int n = in.u8() % 4; n > 0; --n)
        s->add_children(recipe_id(in, root));
      s->set_past_no_return(in.u8() % 8 == 7);
      s->set_attempt(1 + in.u8() % 3);
      break;
    }
    case 2: {
      auto* f = r.mutable_failed();
      f->set_proc_id(recipe_id(in, root));
      f->set_failed_state(recipe_state(in));
      f->set_error(in.text());
      break;
    }
    case 3: {
      auto* u = r.mutable_undone();
      auto pick = in.u8();
      if (pick % 4 != 0 && !lsns.empty())
        u->set_undone_lsn(lsns[pick % lsns.size()]);
      u->set_proc_id(recipe_id(in, root));
      u->set_state(recipe_state(in));
      u->set_data(in.text());
      break;
    }
    case 4: {
      auto* f = r.mutable_finished();
      f->set_proc_id(recipe_id(in, root));
      // 5..7 are the final states; 0 and 8 are out of the enum.
      f->set_state(static_cast<pb::ProcState>(in.u8() % 9));
      f->set_result_json(in.text());
      f->set_error(in.text());
      break;
    }
    case 5: {
      auto* s = r.mutable_summary();
      for (int n = in.u8() % 5; n > 0; --n) {
        auto* p = s->add_procs();
        p->set_proc_id(recipe_id(in, root));
        p->set_parent_id(p->proc_id() == root ? 0 : recipe_id(in, root));
        p->set_type(recipe_type(in));
        p->set_state(static_cast<pb::ProcState>(in.u8() % 9));
        p->set_result_json(in.text());
        p->set_error(in.text());
        for (int c = in.u8() % 3; c > 0; --c)
          p->add_children(recipe_id(in, root));
        p->set_nonce(in.text(4));
        if (p->proc_id() == root && in.u8() % 2 == 1) {  // a root's submit, for a resubmit
          p->set_args(in.text());
          p->set_type_version(1 + in.u8() % 3);
          p->set_priority(static_cast<int8_t>(in.u8()));
          p->set_resubmitted_from(in.u64());
        }
      }
      s->set_finished_at_ms(static_cast<int64_t>(in.u64()));
      break;
    }
    case 6: {
      auto* s = r.mutable_suspended();
      s->set_proc_id(recipe_id(in, root));
      s->set_event_key(in.text());
      s->set_deadline_ms(static_cast<int64_t>(in.u64()));
      s->set_resume_state(recipe_state(in));
      if (in.u8() % 4 == 3) {  // waiting for the reply to a call
        s->set_call_service(in.text());
        s->set_call_request(in.text());
      }
      break;
    }
    case 7: {
      auto* t = r.mutable_timer();
      t->set_proc_id(recipe_id(in, root));
      t->set_wake_at_ms(static_cast<int64_t>(in.u64()));
      t->set_resume_state(recipe_state(in));
      break;
    }
    case 8: {
      auto* d = r.mutable_delivered();
      d->set_proc_id(recipe_id(in, root));
      d->set_event_key(in.text());
      d->set_payload_json(in.text());
      d->set_timed_out(in.u8() & 1);
      break;
    }
    case 9:
      r.mutable_rolled_back()->set_error(in.text());
      break;
    case 10:
      r.mutable_id_floor()->set_next_id(in.u64());
      break;
    case 11: {
      auto* e = r.mutable_event();
      e->set_event_key(in.text());
      e->set_payload_json(in.text());
      e->set_arrived_at_ms(static_cast<int64_t>(in.u64()));
      break;
    }
    case 12: {
      auto* t = r.mutable_retried();
      t->set_proc_id(recipe_id(in, root));
      t->set_state(recipe_state(in));
      t->set_attempts(in.u8() % 5);
      t->set_was_failed(in.u8() & 1);
      t->set_error(in.text());
      t->set_at_ms(static_cast<int64_t>(in.u64()));
      break;
    }
    default:
      break;  // no body: an empty record
  }
  return r;
}

/// Moves every procedure id of `r` into the tree: root + id % 8.
void remap_ids(pb::JournalRecord& r, uint64_t root) {
  auto m = [root](uint64_t id) { return root + id % ids_per_tree; };
  switch (r.body_case()) {
    case pb::JournalRecord::kSubmitted:
      r.mutable_submitted()->set_proc_id(m(r.submitted().proc_id()));
      if (r.submitted().parent_id() != 0)
        r.mutable_submitted()->set_parent_id(m(r.submitted().parent_id()));
      break;
    case pb::JournalRecord::kStep:
      r.mutable_step()->set_proc_id(m(r.step().proc_id()));
      for (auto& c : *r.mutable_step()->mutable_children())
        c = m(c);
      break;
    case pb::JournalRecord::kFailed:
      r.mutable_failed()->set_proc_id(m(r.failed().proc_id()));
      break;
    case pb::JournalRecord::kUndone:
      r.mutable_undone()->set_proc_id(m(r.undone().proc_id()));
      break;
    case pb::JournalRecord::kFinished:
      r.mutable_finished()->set_proc_id(m(r.finished().proc_id()));
      break;
    case pb::JournalRecord::kSummary:
      for (auto& p : *r.mutable_summary()->mutable_procs()) {
        p.set_proc_id(m(p.proc_id()));
        for (auto& c : *p.mutable_children())
          c = m(c);
      }
      break;
    case pb::JournalRecord::kSuspended:
      r.mutable_suspended()->set_proc_id(m(r.suspended().proc_id()));
      break;
    case pb::JournalRecord::kTimer:
      r.mutable_timer()->set_proc_id(m(r.timer().proc_id()));
      break;
    case pb::JournalRecord::kDelivered:
      r.mutable_delivered()->set_proc_id(m(r.delivered().proc_id()));
      break;
    case pb::JournalRecord::kRetried:
      r.mutable_retried()->set_proc_id(m(r.retried().proc_id()));
      break;
    case pb::JournalRecord::kCancelled:
      r.mutable_cancelled()->set_parent_id(m(r.cancelled().parent_id()));
      for (auto& c : *r.mutable_cancelled()->mutable_children())
        c = m(c);
      break;
    default:
      break;
  }
}

// -- folding ------------------------------------------------------------------------------------

/// One record as fed to the folder: stored bytes, or (tag 3) a message.
struct fed_record {
  uint64_t lsn = 0;
  bool as_message = false;
  std::string value;
  pb::JournalRecord message;
};

void feed(tree_folder& f, const fed_record& r) {
  if (r.as_message)
    f.add(r.lsn, r.message);
  else
    f.add(r.lsn, r.value);
}

tree_image fold(uint64_t root, const std::vector<fed_record>& records) {
  tree_folder f(root);
  for (const auto& r : records) {
    if (trace) {
      pb::JournalRecord shown;
      bool parsed = r.as_message ? (shown = r.message, true) : shown.ParseFromString(r.value);
      std::fprintf(stderr, "trace: lsn %llu %s%s\n", static_cast<unsigned long long>(r.lsn),
                   parsed ? "" : "(does not parse) ", shown.ShortDebugString().c_str());
    }
    feed(f, r);
  }
  return f.finish();
}

std::string describe(const undo_item& u) {
  return "{proc " + std::to_string(u.proc_id) + ", state " + std::to_string(u.state) + ", lsn "
         + std::to_string(u.lsn) + ", " + std::to_string(u.data.size()) + " data bytes}";
}

bool same_item(const undo_item& a, const undo_item& b) {
  return a.proc_id == b.proc_id && a.state == b.state && a.lsn == b.lsn && a.data == b.data;
}

void check_plan(const tree_image& t, const std::vector<undo_item>& plan) {
  size_t i = 0;
  std::set<uint64_t> partial;
  size_t remote_first = 0;
  for (; i < plan.size() && (plan[i].lsn == 0 || (plan[i].remote && plan[i].lsn == UINT64_MAX));
       ++i) {
    const auto& u = plan[i];
    const auto* p = t.find(u.proc_id);
    REQUIRE(p != nullptr, "plan names an unknown procedure", describe(u));
    REQUIRE(i == 0 || plan[i - 1].proc_id > u.proc_id,
            "partly run states not undone children (higher ids) first", describe(u));
    if (u.remote) {
      // A child on another node whose end never came: its fragment is ordered undone first.
      REQUIRE(p->remote() && !p->remote_undone && p->remote_end_lsn == 0,
              "plan orders an ended or undone fragment with the partly run states", describe(u));
      ++remote_first;
      continue;
    }
    REQUIRE(!p->remote(), "plan undoes a partly run state of a child on another node", describe(u));
    REQUIRE(!is_final(p->status) && !p->partial_undone && !p->steps_ended,
            "plan undoes the partly run state of an ended or already undone procedure",
            describe(u));
    REQUIRE(partial.insert(u.proc_id).second, "plan undoes a partly run state twice", describe(u));
    // failed_state 0 marks a failure outside a step: the current state is undone.
    REQUIRE(u.state == (p->failed && p->failed_state != 0 ? p->failed_state : p->state)
              && u.data == p->data,
            "partial undo with the wrong state or data", describe(u));
  }
  size_t expect_partial = 0;
  size_t expect_steps = 0;
  size_t expect_remote_first = 0;
  for (const auto& [id, p] : t.procs) {
    if (p.remote()) {
      if (!p.remote_undone)
        ++(p.remote_end_lsn == 0 ? expect_remote_first : expect_steps);
      continue;
    }
    if (!is_final(p.status) && !p.partial_undone && !p.steps_ended)
      ++expect_partial;
    for (const auto& s : p.steps)
      if (!s.undone && !s.no_return)
        ++expect_steps;
  }
  REQUIRE(partial.size() == expect_partial, "plan misses a partly run state");
  REQUIRE(remote_first == expect_remote_first, "plan misses a fragment that had not ended");
  REQUIRE(plan.size() - i == expect_steps, "plan does not undo every committed step",
          std::to_string(plan.size() - i) + " of " + std::to_string(expect_steps));
  for (size_t k = i; k < plan.size(); ++k) {
    const auto& u = plan[k];
    REQUIRE(u.lsn != 0, "a partly run state after the committed steps", describe(u));
    REQUIRE(k == i || plan[k - 1].lsn > u.lsn, "committed steps not strictly descending by LSN",
            describe(plan[k - 1]) + " then " + describe(u));
    const auto* p = t.find(u.proc_id);
    REQUIRE(p != nullptr, "plan names an unknown procedure", describe(u));
    if (u.remote) {
      // Among the steps at the LSN of its end here.
      REQUIRE(p->remote() && !p->remote_undone && p->remote_end_lsn == u.lsn,
              "plan orders a fragment at another place than its end", describe(u));
      continue;
    }
    bool found = false;
    for (const auto& s : p->steps)
      if (s.lsn == u.lsn)
        found = !s.undone && !s.no_return && s.executed_state == u.state
                && s.data == u.data;  // the undo sees what the step committed
    REQUIRE(found, "plan item does not match a committed, undoable step", describe(u));
  }
}

/// Journals the undo of `plan[0, k)` as the rollback does, re-folds, and expects the rest.
void check_resume(uint64_t root, std::vector<fed_record> records, const tree_image& t,
                  const std::vector<undo_item>& plan, size_t k) {
  auto lsn = t.last_lsn;
  for (size_t i = 0; i < k; ++i) {
    pb::JournalRecord rec;
    rec.set_format(1);
    auto* u = rec.mutable_undone();
    u->set_undone_lsn(plan[i].remote ? 0 : plan[i].lsn);
    u->set_remote(plan[i].remote);
    u->set_proc_id(plan[i].proc_id);
    u->set_state(plan[i].state);
    u->set_data(plan[i].data);
    fed_record r;
    r.lsn = ++lsn;
    r.as_message = true;
    r.message = std::move(rec);
    records.push_back(std::move(r));
  }
  auto rest = rollback_plan(fold(root, records));
  REQUIRE(rest.size() == plan.size() - k, "resumed rollback plan has the wrong length",
          std::to_string(rest.size()) + " items, expected " + std::to_string(plan.size() - k));
  for (size_t i = 0; i < rest.size(); ++i)
    REQUIRE(same_item(rest[i], plan[k + i]), "resumed rollback plan differs",
            describe(rest[i]) + " instead of " + describe(plan[k + i]));
}

/// fold_tree over the records interleaved with another tree's must equal the tree's own fold.
void check_fold_tree(uint64_t root, const std::vector<fed_record>& records, const tree_image& t) {
  std::vector<stored_record> stored;
  for (const auto& r : records) {
    // Another tree's Submitted (of procedure 1), then this tree's record.
    stored.push_back(stored_record{root + 1, r.lsn, "\x12\x02\x08\x01"});
    stored.push_back(stored_record{root, r.lsn, r.value});
  }
  auto u = fold_tree(root, stored);
  google::protobuf::util::MessageDifferencer diff;
  REQUIRE(diff.Equals(summarize(t, 0), summarize(u, 0)) && t.corrupt == u.corrupt
            && t.last_lsn == u.last_lsn,
          "fold_tree did not ignore another tree's records");
}

void check_summary(uint64_t root, const tree_image& t) {
  auto s1 = summarize(t, 0);
  REQUIRE(static_cast<size_t>(s1.procs_size()) == t.procs.size(),
          "summary does not hold every procedure");
  pb::JournalRecord rec;
  rec.set_format(1);
  *rec.mutable_summary() = s1;
  tree_folder f(root);
  f.add(t.last_lsn + 1, rec);
  auto t2 = f.finish();
  REQUIRE(t2.finished && t2.summarized, "a summarized tree is not finished");
  // (A child on another node in a finished tree has nothing left to order.)
  auto unfinished = std::count_if(t2.procs.begin(), t2.procs.end(), [](const auto& kv) {
    return !is_final(kv.second.status) && !kv.second.remote();
  });
  REQUIRE(rollback_plan(t2).size() == static_cast<size_t>(unfinished),
          "a summarized tree plans undos of steps");
  auto s2 = summarize(t2, 0);
  std::string why;
  google::protobuf::util::MessageDifferencer diff;
  diff.ReportDifferencesToString(&why);
  REQUIRE(diff.Compare(s1, s2), "summary is not a fixed point", why);
}

/// A tree's image, as a snapshot holds it, without what differs by how it was folded (how
/// often, and over how many records, it was compacted).
pb::TreeSnapshot comparable(const tree_image& t) {
  auto s = snapshot_of(t, 0);
  s.clear_records_folded();
  s.clear_compactions();
  return s;
}

void check_compaction(uint64_t root, const std::vector<fed_record>& records, const tree_image& t,
                      size_t split) {
  tree_folder head(root);
  for (size_t i = 0; i < split; ++i)
    feed(head, records[i]);
  const auto& h = head.unfinished();
  // The runtime compacts only a readable tree (tree_compaction.cpp), at its last record.
  if (!h.corrupt.empty() || h.last_lsn == 0 || h.last_lsn != records[split - 1].lsn)
    return;
  std::vector<fed_record> compacted;
  fed_record snap;
  snap.lsn = h.last_lsn;
  snap.message.set_format(1);
  *snap.message.mutable_snapshot() = snapshot_of(h, 0);
  snap.value = snap.message.SerializeAsString();
  compacted.push_back(std::move(snap));
  compacted.insert(compacted.end(), records.begin() + static_cast<std::ptrdiff_t>(split),
                   records.end());
  auto u = fold(root, compacted);
  std::string why;
  google::protobuf::util::MessageDifferencer diff;
  diff.ReportDifferencesToString(&why);
  REQUIRE(diff.Compare(comparable(t), comparable(u)), "a compacted tree folds differently", why);
  REQUIRE(t.corrupt == u.corrupt && t.last_lsn == u.last_lsn, "a compacted tree folds differently",
          t.corrupt + " / " + u.corrupt);
  REQUIRE(undos_done(t) == undos_done(u), "a compacted tree counts other undos done");
  auto p1 = rollback_plan(t);
  auto p2 = rollback_plan(u);
  REQUIRE(p1.size() == p2.size(), "a compacted tree plans another rollback");
  for (size_t i = 0; i < p1.size(); ++i)
    REQUIRE(same_item(p1[i], p2[i]), "a compacted tree plans another rollback",
            describe(p1[i]) + " instead of " + describe(p2[i]));
  google::protobuf::util::MessageDifferencer sdiff;
  REQUIRE(sdiff.Equals(summarize(t, 0), summarize(u, 0)),
          "a compacted tree summarizes differently");
}

void check_keys(const uint8_t* data, size_t size) {
  uint64_t a = 0;
  uint64_t b = 0;
  REQUIRE(journal_keys::decode({reinterpret_cast<const char*>(data), size}, &a, &b)
            == (size == journal_keys::key_size),
          "decode accepts a key of the wrong size");
  if (size < 2 * journal_keys::key_size)
    return;
  auto key = [](const uint8_t* p) {
    return std::string(reinterpret_cast<const char*>(p), journal_keys::key_size);
  };
  auto k1 = key(data);
  auto k2 = key(data + journal_keys::key_size);
  uint64_t r1 = 0, l1 = 0, r2 = 0, l2 = 0;
  REQUIRE(journal_keys::decode(k1, &r1, &l1) && journal_keys::decode(k2, &r2, &l2),
          "decode rejects a 16-byte key");
  REQUIRE(journal_keys::encode(r1, l1) == k1 && journal_keys::encode(r2, l2) == k2,
          "encode(decode(key)) != key");
  // RocksDB's bytewise order must be (root_id, lsn) order.
  REQUIRE((k1 < k2) == (std::pair{r1, l1} < std::pair{r2, l2}),
          "key order differs from (root_id, lsn) order");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Parse failures are expected by the thousand; protobuf would log each one.
  google::protobuf::SetLogHandler(nullptr);
  const char* s = std::getenv("PROCTOR_FUZZ_STRICT");
  strict = s != nullptr && std::strcmp(s, "1") == 0;
  const char* t = std::getenv("PROCTOR_FUZZ_TRACE");
  trace = t != nullptr && std::strcmp(t, "1") == 0;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_keys(data, size);

  byte_reader in(data, size);
  uint64_t root = 1 + in.u8();
  auto undo = in.u8();
  std::vector<fed_record> records;
  std::vector<uint64_t> lsns;
  uint64_t lsn = 0;
  while (!in.empty() && records.size() < max_records) {
    fed_record r;
    r.lsn = lsn = lsn + 1 + in.u8();
    auto tag = in.u8() % 4;
    auto payload = in.bytes(in.u16());
    if (tag == 1 || tag == 3) {
      byte_reader recipe(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
      r.message = record_from_recipe(recipe, root, lsns);
      r.value = r.message.SerializeAsString();
      r.as_message = tag == 3;
      if (strict) {
        pb::JournalRecord back;
        REQUIRE(back.ParseFromString(r.value), "a record as the runtime writes it does not parse",
                r.message.ShortDebugString());
      }
    } else if (tag == 2 && r.message.ParseFromString(payload)) {
      remap_ids(r.message, root);
      r.value = r.message.SerializeAsString();
    } else {
      r.value = std::move(payload);
    }
    lsns.push_back(r.lsn);
    records.push_back(std::move(r));
  }

  auto t = fold(root, records);
  // Not equal: an unparsable record does not advance last_lsn (nothing at run time reads it).
  REQUIRE(records.empty() || t.last_lsn <= records.back().lsn, "last_lsn past the last LSN");
  auto plan = rollback_plan(t);
  if (trace)
    for (const auto& u : plan)
      std::fprintf(stderr, "trace: plan %s\n", describe(u).c_str());
  check_plan(t, plan);
  check_resume(root, records, t, plan, undo % (plan.size() + 1));
  bool all_stored =
    std::none_of(records.begin(), records.end(), [](const fed_record& r) { return r.as_message; });
  if (all_stored)
    check_fold_tree(root, records, t);
  check_summary(root, t);
  if (!records.empty())
    check_compaction(root, records, t, 1 + (undo * 131u + records.size()) % records.size());
  return 0;
}

#ifdef PROCTOR_FUZZ_SEEDS_MAIN

#include "tests/fuzz/seed_main.hpp"

// -- seed corpus --------------------------------------------------------------------------------

namespace {

/// Builds one input: records of tree 7 (children 8, 9) as the runtime journals them.
class seed {
public:
  explicit seed(uint8_t undo = 0) {
    bytes_ += static_cast<char>(6);  // root 7
    bytes_ += static_cast<char>(undo);
  }

  seed& add(const pb::JournalRecord& r, uint8_t gap = 0) {
    return chunk(r.SerializeAsString(), 0, gap);
  }

  seed& chunk(const std::string& payload, uint8_t tag, uint8_t gap = 0) {
    bytes_ += static_cast<char>(gap);
    bytes_ += static_cast<char>(tag);
    bytes_ += static_cast<char>(payload.size() & 0xff);
    bytes_ += static_cast<char>(payload.size() >> 8);
    bytes_ += payload;
    return *this;
  }

  const std::string& bytes() const { return bytes_; }

private:
  std::string bytes_;
};

pb::JournalRecord submitted(uint64_t id, uint64_t parent, const std::string& type,
                            const std::string& data, int32_t state = 1) {
  pb::JournalRecord r;
  r.set_format(1);
  auto* s = r.mutable_submitted();
  s->set_proc_id(id);
  s->set_parent_id(parent);
  s->set_type(type);
  s->set_type_version(1);
  s->set_data(data);
  s->set_state(state);
  s->set_nonce(parent == 0 ? "n-1" : "");
  s->set_submitted_at_ms(1700000000000);
  return r;
}

pb::JournalRecord step(uint64_t id, int32_t executed, int32_t next, const std::string& data,
                       std::vector<uint64_t> children = {}, bool no_return = false) {
  pb::JournalRecord r;
  r.set_format(1);
  auto* s = r.mutable_step();
  s->set_proc_id(id);
  s->set_executed_state(executed);
  s->set_next_state(next);
  s->set_data(data);
  for (auto c : children)
    s->add_children(c);
  s->set_past_no_return(no_return);
  s->set_attempt(1);
  return r;
}

pb::JournalRecord finished(uint64_t id, pb::ProcState state, const std::string& result,
                           const std::string& error = {}) {
  pb::JournalRecord r;
  r.set_format(1);
  auto* f = r.mutable_finished();
  f->set_proc_id(id);
  f->set_state(state);
  f->set_result_json(result);
  f->set_error(error);
  return r;
}

pb::JournalRecord failed(uint64_t id, int32_t state, const std::string& error) {
  pb::JournalRecord r;
  r.set_format(1);
  auto* f = r.mutable_failed();
  f->set_proc_id(id);
  f->set_failed_state(state);
  f->set_error(error);
  return r;
}

pb::JournalRecord undone(uint64_t lsn, uint64_t id, int32_t state, const std::string& data) {
  pb::JournalRecord r;
  r.set_format(1);
  auto* u = r.mutable_undone();
  u->set_undone_lsn(lsn);
  u->set_proc_id(id);
  u->set_state(state);
  u->set_data(data);
  return r;
}

std::vector<std::pair<std::string, std::string>> seeds() {
  std::vector<std::pair<std::string, std::string>> out;
  auto put = [&](const char* name, const seed& s) { out.emplace_back(name, s.bytes()); };
  // Ledger data as demo.ledger journals it (field 1 steps, 7 step).
  const std::string d0 = "\x08\x03\x12\x04/tmp";
  const std::string d1 = d0 + "\x38\x01";
  const std::string d2 = d0 + "\x38\x02";

  put("success", seed()
                   .add(submitted(7, 0, "demo.ledger", d0))
                   .add(step(7, 1, 1, d1))
                   .add(step(7, 1, 1, d2))
                   .add(finished(7, pb::SUCCESS, R"({"steps":3})")));

  // A root that spawned two children (one batch: the step and the children's Submitted).
  seed spawn;
  spawn.add(submitted(7, 0, "demo.fanout", "\x08\x02"))
    .add(step(7, 1, 2, "\x08\x02", {8, 9}))
    .add(submitted(8, 7, "demo.noop", "\x08\x01"))
    .add(submitted(9, 7, "demo.noop", "\x08\x01"))
    .add(step(8, 1, 1, "\x08\x01\x10\x01"))
    .add(finished(8, pb::SUCCESS, ""));
  put("spawn_running", spawn);
  seed joined = spawn;
  joined.add(step(9, 1, 1, "\x08\x01\x10\x01")).add(finished(9, pb::SUCCESS, "", ""), 3);
  put("spawn_joined", joined);

  // LSNs: 1 root submitted, 2 root step, 3-4 children, 5 step of 8, 6 step of 9, 7 failed.
  seed failing(3);
  failing.add(submitted(7, 0, "demo.ledger", d0))
    .add(step(7, 1, 1, d1, {8, 9}))
    .add(submitted(8, 7, "demo.ledger", d0))
    .add(submitted(9, 7, "demo.ledger", d0))
    .add(step(8, 1, 1, d1))
    .add(step(9, 1, 1, d1))
    .add(failed(9, 1, "demo.ledger: failing at step 1 as asked (fail_at)"));
  put("failed", failing);
  seed rolling = failing;
  rolling.add(undone(0, 9, 1, d1)).add(undone(0, 8, 1, d1)).add(undone(6, 9, 1, d0));
  put("rolling_back", rolling);
  seed rolled = rolling;
  pb::JournalRecord rb;
  rb.set_format(1);
  rb.mutable_rolled_back()->set_error("demo.ledger: failing at step 1 as asked (fail_at)");
  rolled.add(undone(5, 8, 1, d0)).add(undone(0, 7, 1, d1)).add(undone(2, 7, 1, d0)).add(rb);
  put("rolled_back", rolled);

  seed no_return(1);
  no_return.add(submitted(7, 0, "demo.flaky", "\x12\x04/tmp"))
    .add(step(7, 1, 2, "\x12\x04/tmp"))
    .add(step(7, 2, 3, "\x12\x04/tmp", {}, true))
    .add(failed(7, 3, "boom"));
  put("past_no_return", no_return);

  pb::JournalRecord sum;
  sum.set_format(1);
  auto* s = sum.mutable_summary();
  s->set_finished_at_ms(1700000001000);
  for (uint64_t id : {7, 8, 9}) {
    auto* p = s->add_procs();
    p->set_proc_id(id);
    p->set_parent_id(id == 7 ? 0 : 7);
    p->set_type(id == 7 ? "demo.fanout" : "demo.noop");
    p->set_state(pb::SUCCESS);
    p->set_result_json(id == 7 ? R"({"children":2})" : "");
    if (id == 7) {
      p->add_children(8);
      p->add_children(9);
      p->set_nonce("n-1");
    }
  }
  put("summary", seed().add(sum));

  pb::JournalRecord susp;
  susp.set_format(1);
  susp.mutable_suspended()->set_proc_id(7);
  susp.mutable_suspended()->set_event_key("order-42");
  susp.mutable_suspended()->set_deadline_ms(1700000005000);
  susp.mutable_suspended()->set_resume_state(2);
  pb::JournalRecord del;
  del.set_format(1);
  del.mutable_delivered()->set_proc_id(7);
  del.mutable_delivered()->set_event_key("order-42");
  del.mutable_delivered()->set_payload_json(R"({"paid":true})");
  put("event", seed()
                 .add(submitted(7, 0, "demo.wait_event", "\x0a\x08order-42"))
                 .add(susp)
                 .add(del)
                 .add(step(7, 2, 2, "\x0a\x08order-42"))
                 .add(finished(7, pb::SUCCESS, R"({"paid":true})")));

  pb::JournalRecord timer;
  timer.set_format(1);
  timer.mutable_timer()->set_proc_id(7);
  timer.mutable_timer()->set_wake_at_ms(1700000009000);
  timer.mutable_timer()->set_resume_state(1);
  put("timer", seed()
                 .add(submitted(7, 0, "demo.noop", "\x08\x02"))
                 .add(step(7, 1, 1, "\x08\x02\x10\x01"))
                 .add(timer));

  pb::JournalRecord floor;
  floor.set_format(1);
  floor.mutable_id_floor()->set_next_id(100);
  pb::JournalRecord ev;
  ev.set_format(1);
  ev.mutable_event()->set_event_key("k");
  ev.mutable_event()->set_payload_json("{}");
  put("damaged", seed()
                   .add(submitted(7, 0, "demo.noop", ""))
                   .add(floor)
                   .add(ev)
                   .chunk(std::string("\x08\x01", 2), 0)      // format only: an empty record
                   .chunk(std::string("\x1a\x05\x08", 3), 0)  // truncated
                   .add(step(12, 1, 1, ""), 9));              // unknown procedure

  // Recipes (tags 1 and 3) and a remapped record (tag 2).
  put("recipes", seed(1)
                   .chunk(std::string("\x00\x00\x00", 3), 1)  // Submitted of the root
                   .chunk(std::string("\x01\x00\x01\x02\x00\x02\x01\x02", 8), 1)  // spawn 8, 9
                   .chunk(std::string("\x00\x01\x00\x03", 4), 3)                  // Submitted of 8
                   .chunk(std::string("\x02\x02\x01\x03err", 7), 1)               // 9 fails
                   .chunk(std::string("\x03\x01\x00\x01\x00", 5), 3)              // undo a step
                   .chunk(std::string("\x04\x00\x05", 3), 1)                      // root ROLLEDBACK
                   .chunk(step(1003, 1, 2, "x").SerializeAsString(), 2));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  return proctor::fuzz::write_seeds(argc, argv, "journal_record_fuzzer", seeds());
}
#endif
