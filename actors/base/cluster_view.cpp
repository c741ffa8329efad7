#include "actors/base/cluster_view.hpp"

#include <algorithm>
#include <limits>

#include "actors/wire/incarnation_hex.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

std::string peer_status::down_since_text() const {
  auto out = "unreachable since " + utc_text(since_ms);
  if (!reason.empty())
    out += " (" + reason + ")";
  return out;
}

std::string peer_status::unreachable_text() const {
  return "node " + name + " " + down_since_text();
}

uint64_t cluster_view::total(uint64_t peer_status::*count) const {
  std::lock_guard<std::mutex> g(mtx_);
  uint64_t n = 0;
  for (const auto& [name, p] : peers_)
    n += p.*count;
  return n;
}

std::vector<cluster_view::forgotten_peer> cluster_view::forgotten_peers() const {
  std::lock_guard<std::mutex> g(mtx_);
  std::vector<forgotten_peer> out;
  for (const auto& [name, p] : peers_)
    if (p.forgotten_at_ms != 0)
      out.push_back({name, p.forgotten_incarnation, p.forgotten_at_ms});
  return out;
}

std::optional<std::pair<std::string, std::vector<std::string>>>
cluster_view::first_disagreeing(const std::vector<std::string>& members) const {
  std::lock_guard<std::mutex> g(mtx_);
  for (const auto& [name, p] : peers_)
    if (p.up && p.heard && !p.forgotten_now() && gone_.count(name) == 0 && !p.members.empty()
        && p.members != members)
      return std::make_pair(name, p.members);
  return std::nullopt;
}

void cluster_view::set(const peer_status& s) {
  std::lock_guard<std::mutex> g(mtx_);
  auto& mine = peers_[s.name];
  auto types = std::move(mine.types);
  bool known = mine.types_known;
  auto forgotten_at = mine.forgotten_at_ms;
  auto forgotten_lsn = mine.forgotten_lsn;
  auto forgotten_incarnation = mine.forgotten_incarnation;
  const bool was_forgotten = mine.forgotten_now();
  mine = s;
  mine.forgotten_at_ms = forgotten_at;
  mine.forgotten_lsn = forgotten_lsn;
  mine.forgotten_incarnation = forgotten_incarnation;
  if (mine.forgotten_now() != was_forgotten)
    publish_names();  // back as a new incarnation: a member again
  if (!s.types_known && known) {
    // A status without types (a down peer) keeps what the peer said before.
    mine.types = std::move(types);
    mine.types_known = true;
  }
}

std::optional<peer_status> cluster_view::get(const std::string& name) const {
  std::lock_guard<std::mutex> g(mtx_);
  auto i = peers_.find(name);
  if (i == peers_.end())
    return std::nullopt;
  return i->second;
}

bool cluster_view::is_up(const std::string& name) const {
  std::lock_guard<std::mutex> g(mtx_);
  auto i = peers_.find(name);
  return i != peers_.end() && i->second.up;
}

std::vector<peer_status> cluster_view::all() const {
  std::lock_guard<std::mutex> g(mtx_);
  std::vector<peer_status> out;
  for (const auto& [name, s] : peers_)
    out.push_back(s);
  return out;
}

void cluster_view::forget(const std::string& name, uint64_t lsn, uint64_t incarnation,
                          int64_t at_ms) {
  std::lock_guard<std::mutex> g(mtx_);
  auto& mine = peers_[name];
  if (mine.name.empty())
    mine.name = name;
  mine.forgotten_at_ms = at_ms;
  mine.forgotten_lsn = lsn;
  mine.forgotten_incarnation = incarnation;
  publish_names();
}

void cluster_view::set_self(const std::string& name, uint16_t number) {
  std::lock_guard<std::mutex> g(mtx_);
  self_ = name;
  self_number_ = number;
  if (!name.empty() && std::find(all_names_.begin(), all_names_.end(), name) == all_names_.end()) {
    all_names_.push_back(name);
    std::sort(all_names_.begin(), all_names_.end());
  }
  publish_names();
}

std::string cluster_view::add_peer(const std::string& name, uint16_t number) {
  std::lock_guard<std::mutex> g(mtx_);
  if (auto i = numbers_.find(number); i != numbers_.end()) {
    if (i->second == name)
      return {};
    return "nodes '" + name + "' and '" + i->second + "' get the same node number "
           + std::to_string(number) + " (ids would collide); rename one of them";
  }
  if (number == self_number_ || name == self_)
    return "nodes '" + name + "' and '" + self_ + "' get the same node number "
           + std::to_string(number) + " (ids would collide); rename one of them";
  for (const auto& [num, peer] : numbers_)
    if (peer == name)
      return "node '" + name + "' is known with number " + std::to_string(num) + ", not "
             + std::to_string(number);
  numbers_[number] = name;
  all_names_.push_back(name);
  std::sort(all_names_.begin(), all_names_.end());
  publish_names();
  return {};
}

bool cluster_view::is_peer(const std::string& name) const {
  std::lock_guard<std::mutex> g(mtx_);
  if (name.empty() || name == self_)
    return false;
  for (const auto& [num, peer] : numbers_)
    if (peer == name)
      return true;
  return false;
}

std::string cluster_view::peer_of_number(uint16_t number) const {
  std::lock_guard<std::mutex> g(mtx_);
  auto i = numbers_.find(number);
  return i == numbers_.end() ? std::string{} : i->second;
}

void cluster_view::set_placeable(std::set<std::string> names) {
  std::lock_guard<std::mutex> g(mtx_);
  if (placeable_ == names)
    return;
  placeable_ = std::move(names);
  publish_names();
}

void cluster_view::set_gone(std::set<std::string> names) {
  std::lock_guard<std::mutex> g(mtx_);
  gone_ = std::move(names);
}

bool cluster_view::is_not_placeable(const std::string& name) const {
  std::lock_guard<std::mutex> g(mtx_);
  return placeable_ && placeable_->count(name) == 0;
}

std::map<uint16_t, std::string> cluster_view::peer_numbers() const {
  std::lock_guard<std::mutex> g(mtx_);
  return numbers_;
}

void cluster_view::publish_names() {
  auto names = std::make_shared<std::vector<std::string>>();
  for (const auto& n : all_names_) {
    if (placeable_ && placeable_->count(n) == 0)
      continue;
    auto i = peers_.find(n);
    if (i == peers_.end() || !i->second.forgotten_now())
      names->push_back(n);
  }
  names_.store(std::move(names), std::memory_order_release);
}

bool cluster_view::lost(const std::string& name, uint64_t submitted_lsn) const {
  std::lock_guard<std::mutex> g(mtx_);
  auto i = peers_.find(name);
  return submitted_lsn != 0 && i != peers_.end() && i->second.forgotten_lsn > submitted_lsn;
}

std::string cluster_view::lost_text(const std::string& name) const {
  auto s = get(name);
  return "not undone: node " + name + " forgotten by an operator at "
         + utc_text(s ? s->forgotten_at_ms : 0) + " (what it held is lost)";
}

std::string cluster_view::waiting_text(const std::string& node) const {
  auto s = get(node);
  if (!s || s->up)
    return "node " + node;
  return s->unreachable_text();
}

namespace {

bool has_type(const peer_status& s, const std::string& type) {
  return s.types_known && std::binary_search(s.types.begin(), s.types.end(), type);
}

uint64_t count(const std::map<std::string, uint64_t>& placed, const std::string& node) {
  auto i = placed.find(node);
  return i == placed.end() ? 0 : i->second;
}

}  // namespace

std::string cluster_view::pick(const std::string& type, const std::string& self, bool self_has,
                               const std::map<std::string, uint64_t>& placed) const {
  std::lock_guard<std::mutex> g(mtx_);
  std::string best;
  uint64_t best_load = std::numeric_limits<uint64_t>::max();
  bool best_up = false;
  auto consider = [&](const std::string& name, bool up, uint64_t load) {
    // Up beats down; then the lighter load; then the name (the same choice every time).
    if (best.empty() || (up && !best_up) || (up == best_up && load < best_load)) {
      best = name;
      best_load = load;
      best_up = up;
    }
  };
  if (self_has)
    consider(self, true, local_live.load(std::memory_order_relaxed) + count(placed, self));
  for (const auto& [name, s] : peers_)
    if (has_type(s, type) && !s.forgotten_now())  // (a forgotten node takes no new work)
      consider(name, s.up, s.live + count(placed, name));
  return best;
}

std::string journal_forgotten_text(const std::string& node, const std::string& peer,
                                   uint64_t incarnation, int64_t at_ms) {
  return "node " + node + ": node " + peer + " forgot this journal (incarnation "
         + incarnation_hex(incarnation) + ") at " + utc_text(at_ms)
         + " (proctor node forget): what it holds was declared lost there and undone "
           "elsewhere, so it is not carried on. Not serving, and this journal is refused at "
           "every start: empty the data directory (or restore a backup with --restore-from) "
           "to bring the name back as a new incarnation (docs/cluster.md, \"Forgetting a node\")";
}

}  // namespace proctor
