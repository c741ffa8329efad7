#include "actors/node/node.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/base/messages.hpp"
#include "actors/base/peer_status.hpp"
#include "actors/base/task_spec.hpp"
#include "actors/cluster/client_server.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/node/node_coordinator.hpp"
#include "actors/node/node_identity.hpp"
#include "actors/scheduling/step_scheduler.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "persistence/id_floor.hpp"
#include "persistence/keys.hpp"
#include "persistence/tree_image.hpp"

namespace proctor {

namespace {

/// The node supervisor: watches the executor, scheduler, journal, outbox and timeout actor.
/// One of them dying means the node can no longer keep its promises; their state is a function
/// of the journal, so the node fail-stops and a restart recovers everything from the journal.
caf::behavior node_supervisor(caf::event_based_actor* self, std::vector<caf::actor> watched,
                              std::function<void(const std::string&)> on_failure) {
  for (auto& a : watched)
    self->monitor(a);
  self->set_down_handler([self, on_failure](caf::down_msg& m) {
    if (!m.reason || m.reason == caf::exit_reason::user_shutdown)
      return;
    auto why = "a system actor of the node died (" + error_text(self->system(), m.reason)
               + "); the node fail-stops, a restart recovers from the journal";
    if (on_failure) {
      on_failure(why);
      return;
    }
    spdlog::critical("{}", why);
    spdlog::shutdown();
    std::_Exit(71);
  });
  return {[](caf::ok_atom) {}};
}

}  // namespace

void tune_actor_system(caf::actor_system_config& cfg) {
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  cfg.set("scheduler.policy", caf::atom("sharing"));
  // CAF takes a scheduler module from the config's factories instead of building its own:
  // work sharing, on a clock that skips needless cancels (node_coordinator.hpp).
  cfg.module_factories.push_back(
    [](caf::actor_system& sys) -> caf::actor_system::module* { return new node_coordinator(sys); });
  // One worker per core (at least two). Two more helped while glibc's malloc made workers
  // wait on its locks; with jemalloc the extra workers only sleep and wake on futexes: on
  // 2 cores, 2 workers gave proctor-bench (c) p99 5.6-8.5 ms where 4 gave 8.1-16.9 ms (four
  // alternating runs each), and (b) no less.
  cfg.set("scheduler.max-threads", size_t{std::max(2u, std::thread::hardware_concurrency())});
  // No middleman worker threads: BASP messages are then handled in the multiplexer's thread,
  // in order. With workers, CAF 0.17.6's BASP broker hands a closed connection's cleanup to
  // a worker queue while it keys connections by fd; Linux gives the freed fd number to the
  // next accepted connection, whose messages were then credited to the gone peer and its
  // replies lost (about 1 call in 2,300 with four clients). Clients now use our own broker
  // (client_server.hpp), but node-to-node CAF traffic would meet the same race.
  cfg.set("middleman.workers", size_t{0});
}

node::node(caf::actor_system& sys, const registry& types) : sys_(sys), types_(types) {}

node::~node() {
  stop();
}

caf::expected<recovery_report> node::start(node_options opts) {
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) {
    return std::chrono::duration<double>(clock::now() - t).count();
  };
  auto t0 = clock::now();
  std::shared_ptr<journal_store> store = opts.store;
  uint64_t epoch = opts.epoch;
  if (!store) {
    // The directory's lock first, RocksDB's second, in every process: a standby waiting
    // for the first never races a node for the second.
    std::string err;
    if (!opts.lock) {
      bool held = false;
      opts.lock = active_lock::try_take(opts.data_dir, &err, &held);
      // Not held but unusable (permissions): RocksDB's open below says it best.
      if (!opts.lock && held)
        return caf::make_error(caf::sec::runtime_error, err);
    }
    auto s = open_rocksdb_store(opts.data_dir, &err);
    if (!s)
      return caf::make_error(caf::sec::runtime_error, err);
    store = std::move(s);
    if (opts.lock) {
      epoch = opts.lock->epoch();
      store = fenced_store(std::move(store), opts.lock);
    }
  }
  // The name is fixed by the directory (which the store holds locked from here on).
  if (!opts.name.empty() || opts.store == nullptr) {
    auto id = opts.store == nullptr ? settle_identity(opts.data_dir, opts.name)
                                    : caf::expected<node_identity>{node_identity{opts.name, 0}};
    if (!id)
      return std::move(id.error());
    opts.name = id->name;
    if (opts.number == 0 && !opts.name.empty())
      opts.number = id->number != 0 ? id->number : node_number_of(opts.name);
  }
  // The node's environment and the actors that need nothing of the journal first, among
  // them the executor, which takes the trees over while the scan folds the next ones.
  auto env = std::make_shared<node_env>();
  if (opts.auth_policy)
    env->policy = opts.auth_policy;
  env->reload_security = opts.reload_security;
  if (opts.refused_requests)
    env->refused_requests = opts.refused_requests;
  env->types = &types_;
  env->next_id = std::make_shared<std::atomic<uint64_t>>(0);  // set once the scan is done
  env->stuck_after = opts.stuck_after;
  env->passivate_after = opts.executor.passivate_after;
  env->compact_after = opts.executor.compact_after;
  env->on_procedure_start = opts.on_procedure_start;
  env->services = opts.services;
  env->started_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  env->epoch = epoch;
  env->store = store;
  env->node_name = opts.name;
  env->node_number = opts.number;
  env->transport = opts.transport;
  env->cluster_member = opts.cluster_member;
  if (!opts.name.empty())
    env->cluster->set_self(opts.name, opts.number);
  for (const auto& peer : opts.peer_names)
    if (auto why = env->cluster->add_peer(peer, node_number_of(peer)); !why.empty())
      return caf::make_error(caf::sec::runtime_error, why);
  // Every type's limits as its code declares them (an operator's, read below, override
  // them); every type is counted by the scheduler, limited or not.
  std::map<std::string, type_limits> declared;
  for (const auto& name : types_.names()) {
    const auto& l = types_.find(name)->limits;
    declared[name] = l;
    env->limited_types.try_emplace(name, l.any());
  }
  env->scheduler =
    spawn_step_scheduler(sys_, opts.workers, opts.stuck_after, declared, env->locks_taken);
  env->timeout = spawn_timeout(sys_);
  auto executor = spawn_recovering_executor(sys_, env, opts.executor);
  // However start() is left before the node runs (a refusal below, an exception from the
  // scan), those actors go.
  struct give_up_guard {
    std::vector<caf::actor> actors;
    ~give_up_guard() {
      for (const auto& a : actors)
        caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    }
  } give_up{{executor, env->scheduler, env->timeout}};

  // One scan: fold records per tree (a tree's records are contiguous), collect the node's
  // own records (id floor, events), find the highest LSN and id. The trees go to the
  // executor in parts as they are folded; the node's own records come first (root 0).
  recovery_report rep;
  rep.open_seconds = since(t0);
  auto t_scan = clock::now();
  auto part = std::make_shared<recovered_state>();
  size_t part_procs = 0;
  auto send_part = [&] {
    caf::anon_send(executor, recover_part_atom::value, std::move(part));
    part = std::make_shared<recovered_state>();
    part_procs = 0;
  };
  uint64_t max_lsn = journal_keys::id_floor_lsn;
  uint64_t next_id = (uint64_t{opts.number} << id_node_shift) + 1;
  std::vector<outbox_item> outbox;
  uint64_t incarnation = 0;                           // this node's (NodeIncarnation)
  std::map<std::string, uint64_t> peer_incarnations;  // as first heard (PeerIncarnation)
  struct forgotten_peer {
    std::string peer;
    uint64_t incarnation = 0;
    uint64_t lsn = 0;
  };
  std::vector<forgotten_peer> forgotten;          // NodeForgotten records, in LSN order
  std::optional<pb::ForgottenBy> forgotten_by;    // a peer forgot this journal (the last said)
  std::map<std::string, recovered_limit> limits;  // an operator's, by type (TypeLimits)
  std::map<std::string, recovered_schedule> schedules;  // by name (Schedule), the last of each
  std::map<std::string, recovered_peer_progress> peer_progress;  // by peer, the last of each
  std::optional<tree_folder> folder;  // in place: no heap folder per tree
  auto close_tree = [&] {
    if (!folder)
      return;
    auto t = folder->finish();
    rep.procedures += t.procs.size();
    ++rep.trees;
    for (const auto& [id, p] : t.procs)
      if (owner_of(id) == opts.number)  // a fragment's root has its parent node's id
        next_id = std::max(next_id, id + 1);
    if (!t.corrupt.empty())
      ++rep.quarantined;
    part_procs += t.procs.size();
    part->trees.push_back(std::move(t));
    folder.reset();
    // Parts of some thousands of procedures: the executor's share of the work keeps pace
    // with the scan, and a message per tree would cost more than the parts save.
    if (part_procs >= std::max<size_t>(1, opts.recovery_part_procs))
      send_part();
  };
  uint64_t current_root = 0;
  auto st = store->scan([&](const stored_record& r) {
    if (r.root_id == journal_keys::replica_root)
      return true;  // a replica group's records, not the journal's (keys.hpp)
    ++rep.records;
    max_lsn = std::max(max_lsn, r.lsn);
    if (r.root_id == journal_keys::meta_root) {
      pb::JournalRecord m;
      if (!m.ParseFromString(r.value)) {
        spdlog::error("damaged node record at lsn {} kept as is", r.lsn);
        return true;
      }
      if (m.has_id_floor()) {
        next_id = std::max(next_id, m.id_floor().next_id());
        // Records deleted meanwhile had LSNs up to its next_lsn - 1: never read back lower.
        if (m.id_floor().next_lsn() > 0)
          max_lsn = std::max(max_lsn, m.id_floor().next_lsn() - 1);
      } else if (m.has_incarnation())
        incarnation = m.incarnation().incarnation();
      else if (m.has_forgotten_by())
        forgotten_by = m.forgotten_by();
      else if (m.has_peer_incarnation())
        peer_incarnations[m.peer_incarnation().peer()] = m.peer_incarnation().incarnation();
      else if (m.has_node_forgotten()) {
        // In LSN order: an incarnation recorded before the forgetting no longer holds.
        const auto& f = m.node_forgotten();
        peer_incarnations.erase(f.peer());
        forgotten.push_back({f.peer(), f.incarnation(), r.lsn});
        env->cluster->forget(f.peer(), r.lsn, f.incarnation(), f.at_ms());
      } else if (m.has_type_limits())
        limits[m.type_limits().type()] = limit_of(r.lsn, m.type_limits());
      else if (m.has_peer_progress()) {
        auto& p = peer_progress[m.peer_progress().peer()];
        if (r.lsn >= p.lsn)
          p = recovered_peer_progress{r.lsn, m.peer_progress()};
      } else if (m.has_schedule()) {
        auto& s = schedules[m.schedule().name()];
        if (r.lsn >= s.lsn)
          s = recovered_schedule{r.lsn, m.schedule()};
      } else if (m.has_outbox())
        outbox.push_back(
          outbox_item{r.lsn, m.outbox().peer(), m.outbox().msg().SerializeAsString()});
      else if (m.has_event())
        part->events.push_back(recovered_event{r.lsn, m.event().event_key(),
                                               m.event().payload_json(), m.event().arrived_at_ms(),
                                               m.event().failure()});
      else if (m.has_event_id())
        part->event_ids.push_back(recovered_event_id{
          r.lsn, m.event_id().event_key(), m.event_id().event_id(), m.event_id().at_ms()});
      else if (m.has_nonce_taken())
        part->nonces_taken.push_back(recovered_nonce{r.lsn, m.nonce_taken()});
      else if (m.has_task())
        part->tasks.push_back(recovered_task{r.lsn, m.task()});
      else if (m.has_audit())
        part->audit.push_back(recovered_audit{r.lsn, m.audit()});
      return true;
    }
    if (!folder || r.root_id != current_root) {
      close_tree();
      current_root = r.root_id;
      folder.emplace(r.root_id);
    }
    folder->add(r.lsn, r.value);
    return true;
  });
  close_tree();
  // An operator's limits hold before any procedure starts (at recover_done, below): the
  // scheduler has them before the executor is told the scan is done.
  for (auto& [type, l] : limits) {
    if (is_task_service(type))
      continue;  // a task queue's limits: the executor's (executor_task_limits.cpp)
    auto flag = env->limited_types.find(type);
    if (flag == env->limited_types.end()) {
      spdlog::warn("type {}: limits set by an operator are kept in the journal, but no such "
                   "type is registered in this binary",
                   type);
      continue;
    }
    flag->second.store(l.limits ? l.limits->any() : declared[type].any());
    caf::anon_send(env->scheduler, limits_set_atom::value,
                   type_limit_change{type, l.limits, l.at_ms});
  }
  part->limits = std::move(limits);
  part->schedules = std::move(schedules);
  // A peer forgotten and then back as a new incarnation (a PeerIncarnation after its
  // NodeForgotten): a member again from the start (cluster_view::node_names, placement),
  // not only once its link first reports.
  for (const auto& f : forgotten)
    if (auto i = peer_incarnations.find(f.peer); i != peer_incarnations.end()) {
      peer_status s;
      s.name = f.peer;
      s.incarnation = i->second;
      s.since_ms = env->started_at_ms;
      s.reason = "not connected yet";
      env->cluster->set(s);
    }
  part->peer_progress = std::move(peer_progress);
  if (!st.ok()) {
    if (st.IsCorruption() && st.ToString().find("malformed key") != std::string::npos) {
      spdlog::error("{}; those records are kept and ignored", st.ToString());
    } else {
      // A block that fails its checksum ends the scan: starting on what was read would
      // forget every tree after it. Refuse, and keep everything for an operator.
      return caf::make_error(caf::sec::runtime_error, "the journal in " + opts.data_dir
                                                        + " cannot be read (" + st.ToString()
                                                        + "); not starting on a partial journal");
    }
  }
  if (forgotten_by && incarnation != 0 && forgotten_by->incarnation() == incarnation)
    return caf::make_error(caf::sec::runtime_error,
                           journal_forgotten_text(opts.name, forgotten_by->peer(), incarnation,
                                                  forgotten_by->forgotten_at_ms()));
  send_part();
  rep.scan_seconds = since(t_scan);

  // The journal last: it continues the LSNs and ids the scan found. Then the executor,
  // which has not started, woken or written anything yet, carries on from its take-over.
  env->next_id->store(next_id);
  env->durable_lsn->store(max_lsn);
  env->recovered_lsn = max_lsn;
  max_args_bytes_ = opts.executor.max_args_bytes;
  audit_submits_ = opts.executor.audit_submits;
  journal_config jc;
  jc.store = store;
  jc.next_lsn = max_lsn + 1;
  jc.next_id = env->next_id;
  jc.durable_lsn = env->durable_lsn;
  jc.fatal = opts.on_journal_fatal;
  env->journal = spawn_journal(sys_, std::move(jc));
  // This node's incarnation: drawn, and journaled before anyone hears it, the first time
  // the journal is used (docs/cluster.md, "Incarnations"); then each link may take its
  // peer's answers (the incarnation it knows, or the first it hears).
  if (incarnation == 0) {
    uint64_t id_floor = opts.id_floor;
    if (std::string why; id_floor == 0 && opts.ask_id_floor && !opts.ask_id_floor(&id_floor, &why))
      return caf::make_error(caf::sec::runtime_error,
                             "a new journal must learn where the ids of node " + opts.name
                               + " ended: " + why + "; nothing was started");
    std::random_device rd;
    while (incarnation == 0)
      incarnation = (uint64_t{rd()} << 32) ^ rd();
    pb::JournalRecord rec;
    rec.mutable_incarnation()->set_incarnation(incarnation);
    rec.mutable_incarnation()->set_created_at_ms(env->started_at_ms);
    journal_batch b;
    b.entries.push_back(make_entry(journal_keys::meta_root, rec));
    // The cluster group's floor for the name (its earlier incarnations' reports): ids begin
    // above it, journaled with the incarnation (a restart before the first id keeps it).
    const bool raised = id_floor != 0 && next_id < id_floor + fresh_id_gap;
    if (raised) {
      env->next_id->store(id_floor + fresh_id_gap);
      b.entries.push_back(journal_entry{journal_keys::meta_root,
                                        id_floor_record(env->next_id->load(), max_lsn + 1),
                                        journal_keys::id_floor_lsn});
    }
    caf::scoped_actor self{sys_};
    caf::error failed;
    self->request(env->journal, caf::infinite, append_atom::value, std::move(b))
      .receive([](uint64_t) {}, [&](caf::error& e) { failed = std::move(e); });
    if (failed)
      return caf::make_error(caf::sec::runtime_error,
                             "cannot journal this node's incarnation: " + caf::to_string(failed));
    spdlog::info("node {}: a new journal, incarnation {:016x}", opts.name, incarnation);
    if (raised)
      spdlog::info("node {}: the cluster group holds ids below {} under this name: ids begin "
                   "at {}",
                   opts.name, id_floor, env->next_id->load());
    env->new_journal = opts.ids_from_peers;
  }
  env->incarnation = incarnation;
  outbox_config oc;
  oc.node_name = opts.name;
  oc.incarnation = incarnation;
  oc.journal = env->journal;
  oc.transport = opts.transport;
  oc.reply_timeout = opts.peer_reply_timeout;
  outbox_ = spawn_outbox(sys_, std::move(oc), std::move(outbox));
  // Messages for a forgotten peer journaled before the forgetting: their delete did not
  // become durable before a crash (outbox.cpp); dropped again.
  for (const auto& f : forgotten)
    caf::anon_send(outbox_, outbox_forget_atom::value, f.peer, f.lsn);
  env->outbox = outbox_;
  if (opts.transport) {
    for (const auto& f : forgotten)  // before the expectation: nothing is taken yet
      caf::anon_send(opts.transport, peer_forget_atom::value, f.peer, f.incarnation);
    caf::anon_send(opts.transport, peer_expect_atom::value, std::move(peer_incarnations),
                   env->journal);
  }
  env_ = env;
  executor_ = executor;
  give_up.actors.clear();
  // After every write to `env` above: the message orders them before what the executor
  // reads of it from here on.
  caf::anon_send(executor_, recover_done_atom::value);
  supervisor_ = sys_.spawn(
    node_supervisor,
    std::vector<caf::actor>{executor_, env_->scheduler, env_->journal, outbox_, env_->timeout},
    opts.on_system_failure);
  rep.seconds = since(t0);
  spdlog::info("node started on {}: {} tree(s), {} procedure(s), {} record(s) in {:.3f} s "
               "(open {:.3f} s, scan and fold {:.3f} s)",
               opts.data_dir, rep.trees, rep.procedures, rep.records, rep.seconds, rep.open_seconds,
               rep.scan_seconds);
  return rep;
}

caf::expected<uint16_t> node::serve_clients(const std::string& host, uint16_t port) {
  client_server_config cfg;
  cfg.max_frame_bytes = client_frame_limit(max_args_bytes_);
  cfg.refused_requests = env_->refused_requests;
  cfg.policy = env_->policy;
  cfg.audit_submits = audit_submits_;
  auto s = spawn_client_server(sys_, executor_, host, port, cfg);
  if (!s)
    return std::move(s.error());
  client_server_ = s->first;
  return s->second;
}

void node::note_takeover(std::chrono::milliseconds took) {
  if (env_)
    env_->takeover_ms = took.count();
}

void node::stop() {
  if (!env_)
    return;
  // Clients first: no request reaches an executor that is going away.
  if (client_server_) {
    caf::anon_send_exit(client_server_, caf::exit_reason::user_shutdown);
    client_server_ = nullptr;
  }
  auto env = env_;
  env_.reset();
  // The supervisor first: what follows is a shutdown, not a failure.
  caf::anon_send_exit(supervisor_, caf::exit_reason::kill);
  supervisor_ = nullptr;
  // The executor first (no new work), then the scheduler (its workers finish the steps
  // they run), the journal last (it flushes what was staged).
  // The executor takes the root actors along, and each parent its children.
  caf::anon_send_exit(executor_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(env->scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(env->timeout, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(outbox_, caf::exit_reason::user_shutdown);
  outbox_ = nullptr;
  caf::anon_send_exit(env->journal, caf::exit_reason::user_shutdown);
  executor_ = nullptr;
}

}  // namespace proctor
