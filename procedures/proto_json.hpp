// The one JSON form Proctor writes a protobuf message in, the form it reads args in: field
// names as written in the .proto (snake_case), and 64-bit integers as JSON numbers when a
// double holds them exactly (|v| <= 2^53), as strings beyond that (protobuf's JSON mapping,
// which every JSON parser reads back, and which protobuf's parser takes either way).
// docs/http-api.md ("JSON conventions") documents it for clients.
#pragma once

#include <string>

#include <google/protobuf/message.h>

namespace proctor {

struct proto_json_options {
  /// Also write fields that hold their default value (0, "", false, empty lists).
  bool all_fields = false;
};

/// `m` as JSON in Proctor's convention. Throws std::runtime_error with protobuf's reason
/// when it cannot render it (a string field holding invalid UTF-8).
std::string message_to_json(const google::protobuf::Message& m, proto_json_options o = {});

}  // namespace proctor
