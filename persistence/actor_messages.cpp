#include "persistence/actor_messages.hpp"

#include "persistence/thread_counters.hpp"

namespace proctor {

namespace {
struct messages_tag {};
using message_counts = thread_counters<messages_tag, actor_kinds>;
}  // namespace

const char* actor_kind_name(actor_kind k) {
  switch (k) {
    case actor_kind::procedure:
      return "procedure";
    case actor_kind::executor:
      return "executor";
    case actor_kind::journal:
      return "journal";
    case actor_kind::scheduler:
      return "scheduler";
    case actor_kind::timeout:
      return "timeout";
  }
  return "unknown";
}

uint64_t actor_messages(actor_kind k) {
  return message_counts::sum(static_cast<size_t>(k));
}

void count_actor_message(actor_kind k) noexcept {
  message_counts::add(static_cast<size_t>(k));
}

}  // namespace proctor
