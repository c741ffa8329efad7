#include "actors/base/audit.hpp"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/text_format.h>

#include "tls/cert_identity.hpp"

namespace proctor {

namespace {

using R = pb::Request;
namespace gp = google::protobuf;

/// The body message of `req` (nullptr: none).
const gp::Message* body_of(const pb::Request& req) {
  const auto* field = R::descriptor()->FindFieldByNumber(static_cast<int>(req.body_case()));
  if (field == nullptr || field->type() != gp::FieldDescriptor::TYPE_MESSAGE)
    return nullptr;
  return &R::GetReflection()->GetMessage(req, field);
}

std::string lower(std::string s) {
  for (auto& c : s)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return s;
}

constexpr size_t max_detail = 300;

}  // namespace

bool audited(const pb::Request& req, bool submits) {
  switch (req.body_case()) {
    case R::kSubmit:
      return submits;
    case R::kEvent:
      return true;
    case R::kTask:   // a worker's report: the task's own records say what it did
    case R::kCall:   // a procedure's call: its procedure's records say it
    case R::kAudit:  // a read, if an operator's
    case R::BODY_NOT_SET:
      return false;
    default: {
      auto need = required_role(req);
      return need == role::operator_ || need == role::admin;
    }
  }
}

bool set_actor(pb::Request& req, const caller& who, const std::string& address, bool submits,
               bool forwarder) {
  if (!audited(req, submits)) {
    if (!req.has_actor())
      return false;
    req.clear_actor();
    return true;
  }
  // A node forwards its clients' requests: the door that took it from the client said who
  // asked.
  if (forwarder && req.has_actor() && !req.actor().who().empty())
    return false;
  auto* a = req.mutable_actor();
  a->set_who(who.text());
  a->set_address(address);
  return true;
}

pb::AuditEntry audit_entry_of(const pb::Request& req, int64_t now_ms) {
  pb::AuditEntry e;
  e.set_at_ms(now_ms);
  e.set_who(
    printable(req.actor().who().empty() ? "unknown (no door said who)" : req.actor().who()));
  e.set_address(printable(req.actor().address()));
  std::string act = request_kind(req);
  const gp::Message* body = body_of(req);
  if (body == nullptr) {
    e.set_act(act);
    return e;
  }
  std::unique_ptr<gp::Message> shown{body->New()};
  shown->CopyFrom(*body);
  const auto* d = shown->GetDescriptor();
  const auto* refl = shown->GetReflection();
  std::string sizes;
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->is_repeated())
      continue;
    if (f->name() == "op" && f->type() == gp::FieldDescriptor::TYPE_ENUM) {
      act += " " + lower(refl->GetEnum(*shown, f)->name());
      refl->ClearField(shown.get(), f);
    } else if (f->name() == "id" && f->type() == gp::FieldDescriptor::TYPE_UINT64) {
      e.set_proc_id(refl->GetUInt64(*shown, f));
      refl->ClearField(shown.get(), f);
    } else if ((f->type() == gp::FieldDescriptor::TYPE_BYTES
                || f->type() == gp::FieldDescriptor::TYPE_STRING)
               && f->name().size() > 5 && f->name().compare(f->name().size() - 5, 5, "_json") == 0
               && refl->HasField(*shown, f)) {
      // A payload: its size, not its content (it may be large, or secret).
      sizes +=
        " " + f->name() + ": " + std::to_string(refl->GetString(*shown, f).size()) + " bytes";
      refl->ClearField(shown.get(), f);
    }
  }
  e.set_act(act);
  gp::TextFormat::Printer p;
  p.SetSingleLineMode(true);
  p.SetUseUtf8StringEscaping(false);
  std::string text;
  p.PrintToString(*shown, &text);
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  text += sizes;
  if (!text.empty() && text.front() == ' ')
    text.erase(0, 1);
  e.set_detail(printable(text, max_detail));
  return e;
}

std::string audit_outcome(const pb::Response& r) {
  if (r.code() == pb::Response::OK)
    return "ok";
  return pb::Response::Code_Name(r.code()) + ": " + printable(r.error(), max_detail);
}

}  // namespace proctor
