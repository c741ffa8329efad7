// A fast path for the args JSON of a submit. Nearly every args object is flat and tiny
// ({"steps":5}, {"key":"evt-17"}), yet protobuf's JsonStringToMessage sets up a type resolver
// and a stream converter for each call: ~6 % of the engine's CPU in the throughput benchmark.
// simdjson (On Demand) reads the text; this file only maps its members onto the fields.
// The hand-written parser it replaced was a little faster on these tiny texts (per call:
// {"steps":5} 56 ns vs 81 ns, a three-field LedgerData 183 ns vs 207 ns, against protobuf's
// 2-5 us; a micro benchmark of both, 10^6 calls, 2026-11-25): 25 ns a submit is not worth a
// JSON parser of our own. (Without -march flags On Demand runs simdjson's portable kernel.)
#pragma once

#include <string>
#include <string_view>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace proctor {

/// Parses `text` into `*msg` exactly as google::protobuf::util::JsonStringToMessage (with
/// ignore_unknown_fields = false) would, when `text` is in the subset this function handles:
/// a JSON object (JSON whitespace around tokens) whose names are unescaped and name distinct
/// singular, non-oneof fields of a proto3 message (by json_name or proto name), with values
///   - a plain integer literal (-?(0|[1-9][0-9]*), not -0) in range, for integer fields;
///   - true or false, for bool fields;
///   - a string without escapes or control characters, valid UTF-8, for string fields.
/// Returns false for anything else, valid or not, leaving `*msg` cleared: the caller then
/// uses JsonStringToMessage, which gives the result or the error message.
bool parse_flat_json(std::string_view text, google::protobuf::Message* msg);

/// Run on a text JsonStringToMessage accepted into a message of type `d`: "" if every field
/// in it has the JSON form of its kind, else why not, naming the field by its path as written
/// ("field 'order.items' takes a list (a JSON array), not an object"). Protobuf's parser
/// (3.21) takes a single value where a list belongs (`{"items":{...}}` as a list of one,
/// `{"tags":"a"}` as ["a"]) and flattens lists of lists; a submit refuses both. Well-known
/// types (google.protobuf.*, whose JSON forms are their own) are not looked into.
std::string json_shape_error(std::string_view text, const google::protobuf::Descriptor* d);

}  // namespace proctor
