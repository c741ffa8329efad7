// The CLI's JSON rendering of procedure statuses (the output of `status`, `wait` and `list`).
// One format everywhere, one line per status, keys always in this order:
//
//   {"id":5,"type":"demo.ledger","state":"SUCCESS","root_id":5,"parent_id":0,
//    "children":[6,7],"error":"","result":{"n":3},"waiting_for":""}
//
// On a node of a cluster, a procedure that runs on another node (a child placed there, or
// an entry of a cluster-wide list) has one more key at the end: "node":"b".
#pragma once

#include <string>
#include <string_view>

#include <google/protobuf/repeated_field.h>
#include <nlohmann/json_fwd.hpp>

#include <proctor/wire.pb.h>

namespace proctor {

class json_writer;

/// `s` as one JSON object (no trailing newline). `result` is the procedure's result_json
/// embedded as JSON when it is a valid JSON text, `null` when it is empty, and otherwise
/// the text itself as a JSON string, so the output is always valid JSON.
std::string status_to_json(const pb::ProcStatus& s);

/// `xs` as one JSON array of `status_to_json` objects (no trailing newline).
std::string list_to_json(const google::protobuf::RepeatedPtrField<pb::ProcStatus>& xs);

/// The quarantined trees as one JSON array: [{"root_id":7,"reason":"...","records":12}].
std::string quarantine_to_json(const google::protobuf::RepeatedPtrField<pb::Quarantined>& xs);

/// The cluster as `proctor nodes --json` prints it, one object per node, this one first:
/// [{"name":"a","address":"","number":1,"self":true,"up":true,"since":"2026-11-25T06:40:12Z",
///   "reason":"","rtt_us":0,"outbox":0,"live":3,"started_at":"2026-11-25T06:40:12Z"}, ...]
/// `since`: up (or down) since; `reason`: why it is down; `rtt_us`: the last heartbeat's
/// round trip; `outbox`: messages for it not acknowledged yet; `live`: procedures it holds
/// that have not ended (as of its last heartbeat).
std::string nodes_to_json(const google::protobuf::RepeatedPtrField<pb::NodeStatus>& xs);

/// `s` as a JSON string literal, quotes included. Control characters are escaped; bytes
/// that are not valid UTF-8 become U+FFFD (one per maximal ill-formed subsequence, as
/// Unicode recommends), so the literal is always valid JSON.
std::string json_quote(std::string_view s);

/// A procedure's result_json as a JSON value: itself when it is valid JSON, `null` when
/// empty, else the text as a JSON string (the `result` field of status_to_json).
std::string result_to_json(const std::string& result_json);

/// True if `text` is exactly one valid JSON value (RFC 8259), surrounding whitespace allowed,
/// as nlohmann's parser reads it: also within its limits (numbers within a double's range,
/// \u escapes of surrogates in pairs) and nested at most 200 deep.
bool is_valid_json(std::string_view text);

/// status_to_json's object as a value, for views that nest it; `w` dumps it.
nlohmann::ordered_json status_json_value(json_writer& w, const pb::ProcStatus& s);

/// result_to_json's value, for views that nest it; `w` dumps it.
nlohmann::ordered_json result_json_value(json_writer& w, const std::string& result_json);

}  // namespace proctor
