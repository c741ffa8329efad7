#include "actors/cluster/outbox.hpp"

#include <algorithm>
#include <map>

#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/errors.hpp"
#include "persistence/keys.hpp"

namespace proctor {

void outbox_staging::add(journal_batch& batch, const std::string& peer,
                         const pb::PeerMessage& msg) {
  pb::JournalRecord rec;
  rec.set_format(1);
  rec.mutable_outbox()->set_peer(peer);
  *rec.mutable_outbox()->mutable_msg() = msg;
  items_.emplace_back(batch.entries.size(), outbox_item{0, peer, msg.SerializeAsString()});
  batch.entries.push_back(journal_entry{journal_keys::meta_root, rec.SerializeAsString()});
}

void outbox_staging::hand_over(const caf::actor& outbox, uint64_t batch_last_lsn,
                               size_t batch_size) {
  if (items_.empty() || !outbox)
    return;
  // The journal gives a batch's entries consecutive LSNs, the last one acknowledged.
  auto first = batch_last_lsn + 1 - batch_size;
  std::vector<outbox_item> items;
  items.reserve(items_.size());
  for (auto& [index, item] : items_) {
    item.lsn = first + index;
    items.push_back(std::move(item));
  }
  items_.clear();
  caf::anon_send(outbox, outbox_add_atom::value, std::move(items));
}

namespace {

using retry_atom_t = caf::atom_constant<caf::atom("obxretry")>;

struct peer_queue {
  std::map<uint64_t, std::string> pending;  ///< lsn -> serialized PeerMessage
  bool in_flight = false;
  bool retry_armed = false;
  int failures = 0;
  std::string last_error;
  bool left = false;  ///< the peer stopped in order: its return is expected, not a fault
};

struct outbox_state {
  static inline const char* name = "proctor.outbox";
  outbox_config cfg;
  std::map<std::string, peer_queue> peers;
  uint64_t delivered = 0;
  uint64_t failed = 0;
};

using outbox_actor = caf::stateful_actor<outbox_state>;

void deliver(outbox_actor* self, const std::string& peer);

void delivery_failed(outbox_actor* self, const std::string& peer, const std::string& why) {
  auto& q = self->state.peers[peer];
  q.in_flight = false;
  ++self->state.failed;
  ++q.failures;
  if (q.left) {
    if (q.failures == 1)
      spdlog::info("outbox: {} message(s) for node {} wait for its return (it stopped in "
                   "order)",
                   q.pending.size(), peer);
  } else if (q.failures == 1 || why != q.last_error) {
    spdlog::warn("outbox: {} message(s) for node {} not delivered yet: {}; retrying",
                 q.pending.size(), peer, why);
  }
  q.last_error = why;
  auto delay =
    std::min<int64_t>(self->state.cfg.backoff_max.count(), int64_t{50} << std::min(q.failures, 8));
  if (!q.retry_armed) {
    q.retry_armed = true;
    self->delayed_send(self, std::chrono::milliseconds{delay}, retry_atom_t::value, peer);
  }
}

void deliver(outbox_actor* self, const std::string& peer) {
  auto& st = self->state;
  auto& q = st.peers[peer];
  if (q.in_flight || q.retry_armed || q.pending.empty())
    return;
  if (!st.cfg.transport)
    return delivery_failed(self, peer, "no transport to other nodes");
  pb::Request req;
  auto* d = req.mutable_peer();
  d->set_from(st.cfg.node_name);
  d->set_incarnation(st.cfg.incarnation);
  std::vector<uint64_t> lsns;
  for (auto& [lsn, bytes] : q.pending) {
    if (lsns.size() == st.cfg.max_batch)
      break;
    if (!d->add_messages()->ParseFromString(bytes)) {
      spdlog::error("outbox: damaged message at lsn {} for node {} dropped", lsn, peer);
      d->mutable_messages()->RemoveLast();
    }
    lsns.push_back(lsn);
  }
  q.in_flight = true;
  auto timeout = st.cfg.reply_timeout;
  self
    ->request(st.cfg.transport, timeout + timeout / 2, peer_request_atom::value, peer,
              req.SerializeAsString(), static_cast<uint32_t>(timeout.count()))
    .then(
      [self, peer, lsns](std::string& bytes) {
        pb::Response r;
        if (!r.ParseFromString(bytes))
          return delivery_failed(self, peer, "unreadable answer");
        if (r.code() != pb::Response::OK)
          return delivery_failed(self, peer, r.error());
        auto& st = self->state;
        auto& q = st.peers[peer];
        q.in_flight = false;
        if (q.failures > 0)
          spdlog::info("outbox: node {} takes messages again", peer);
        q.failures = 0;
        q.last_error.clear();
        journal_batch del;
        for (auto lsn : lsns) {
          q.pending.erase(lsn);
          // Runs of consecutive LSNs go as one range.
          if (!del.deletes.empty() && del.deletes.back().before_lsn == lsn)
            del.deletes.back().before_lsn = lsn + 1;
          else
            del.deletes.push_back({journal_keys::meta_root, lsn, lsn + 1});
        }
        st.delivered += lsns.size();
        // Not awaited: a delete lost in a crash delivers the messages once more.
        self->request(st.cfg.journal, caf::infinite, append_atom::value, std::move(del))
          .then([](uint64_t) {}, [](caf::error&) {});
        deliver(self, peer);
      },
      [self, peer](caf::error& e) { delivery_failed(self, peer, error_text(self->system(), e)); });
}

caf::behavior outbox_fn(outbox_actor* self, outbox_config cfg, std::vector<outbox_item> recovered) {
  self->state.cfg = std::move(cfg);
  for (auto& it : recovered)
    self->state.peers[it.peer].pending.emplace(it.lsn, std::move(it.message));
  for (auto& [peer, q] : self->state.peers) {
    spdlog::info("outbox: {} message(s) for node {} recovered", q.pending.size(), peer);
    self->send(self, outbox_kick_atom::value, peer);
  }
  return {
    [self](outbox_add_atom, std::vector<outbox_item>& items) {
      std::vector<std::string> touched;
      for (auto& it : items) {
        self->state.peers[it.peer].pending.emplace(it.lsn, std::move(it.message));
        if (std::find(touched.begin(), touched.end(), it.peer) == touched.end())
          touched.push_back(it.peer);
      }
      for (auto& p : touched)
        deliver(self, p);
    },
    // A peer came up (or a test wants delivery now): try at once.
    [self](outbox_kick_atom, const std::string& peer) {
      auto& q = self->state.peers[peer];
      q.retry_armed = false;
      q.failures = 0;
      q.left = false;
      deliver(self, peer);
    },
    [self](outbox_left_atom, const std::string& peer) {
      auto& q = self->state.peers[peer];
      q.left = true;
      q.failures = 0;  // the next failure says so once
    },
    [self](outbox_forget_atom, const std::string& peer, uint64_t before_lsn) -> size_t {
      auto& q = self->state.peers[peer];
      journal_batch del;
      size_t n = 0;
      for (auto i = q.pending.begin(); i != q.pending.end() && i->first < before_lsn;) {
        auto lsn = i->first;
        if (!del.deletes.empty() && del.deletes.back().before_lsn == lsn)
          del.deletes.back().before_lsn = lsn + 1;
        else
          del.deletes.push_back({journal_keys::meta_root, lsn, lsn + 1});
        i = q.pending.erase(i);
        ++n;
      }
      if (n > 0) {
        spdlog::warn("outbox: {} message(s) for node {} dropped: an operator forgot that node", n,
                     peer);
        // Not awaited: a delete lost in a crash is redone at recovery (node.cpp drops the
        // records of a forgotten peer older than its NodeForgotten).
        self->request(self->state.cfg.journal, caf::infinite, append_atom::value, std::move(del))
          .then([](uint64_t) {}, [](caf::error&) {});
      }
      return n;
    },
    [self](retry_atom_t, const std::string& peer) {
      self->state.peers[peer].retry_armed = false;
      deliver(self, peer);
    },
    [self](outbox_stats_atom) {
      outbox_stats s;
      for (auto& [peer, q] : self->state.peers)
        s.pending.emplace_back(peer, q.pending.size());
      s.delivered = self->state.delivered;
      s.failed_deliveries = self->state.failed;
      return s;
    },
  };
}

}  // namespace

caf::actor spawn_outbox(caf::actor_system& sys, outbox_config cfg,
                        std::vector<outbox_item> recovered) {
  return sys.spawn(outbox_fn, std::move(cfg), std::move(recovered));
}

}  // namespace proctor
