// The client protocol's framing (proto/WIRE.md): each message is a 4-byte big-endian length
// followed by that many bytes of a serialized pb::Request (client to node) or pb::Response
// (node to client). No CAF here: the CLI links this without an actor system.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace proctor {

/// Bytes of the length prefix.
constexpr size_t frame_header_bytes = 4;

/// No frame is ever larger than this, whatever a node's --max-args-bytes: a length past it
/// is garbage or an attack, and a reader must not allocate for it.
constexpr size_t max_frame_bytes = size_t{64} << 20;

/// Writes `len` big-endian into out[0..3].
void put_frame_header(char* out, uint32_t len);

/// The length in a 4-byte header.
uint32_t frame_length(const char* header);

/// `payload` with its header; payload.size() must not exceed max_frame_bytes.
std::string make_frame(std::string_view payload);

/// Field numbers of the tag of a multiplexed request and of its answer (wire.proto
/// Request.tag, Response.tag).
constexpr int request_tag_field = 14;
constexpr int response_tag_field = 8;

/// `msg` (a serialized protobuf message) with the varint field `field` set to `value`:
/// appended, which protobuf's parsing treats as the field's value whatever `msg` held, so a
/// tag is added without parsing the message.
std::string with_varint_field(std::string msg, int field, uint64_t value);

/// Whether a frame of `len` bytes may be read under `limit`. A request is never empty (a
/// Request with no body is no request); a response may be (OK and nothing else, e.g. an
/// empty list, serializes to no bytes), hence `allow_empty`.
enum class frame_check : uint8_t { ok, empty, too_large };
frame_check check_frame_length(uint32_t len, size_t limit, bool allow_empty = false);

/// One line saying why a frame of `len` bytes is refused (check_frame_length != ok).
std::string describe_refused_frame(uint32_t len, size_t limit);

/// Splits a byte stream into frames, however the bytes arrive (a frame across reads, two
/// frames in one read). A refused length (empty or past the limit) ends the stream: the
/// reader stays in that state.
class frame_reader {
public:
  enum class status : uint8_t { need_more, frame, refused };

  explicit frame_reader(size_t limit = max_frame_bytes, bool allow_empty = false)
      : limit_(limit), allow_empty_(allow_empty) {}

  /// Appends received bytes.
  void append(std::string_view bytes) { buf_.append(bytes); }

  /// The next complete frame's payload into `*payload` (status::frame); need_more when the
  /// buffered bytes hold none yet; refused (and `refused_length()`) for a bad length.
  status next(std::string* payload);

  /// The length of the refused frame (after status::refused).
  uint32_t refused_length() const noexcept { return refused_len_; }

  /// Bytes buffered and not yet returned.
  size_t buffered() const noexcept { return buf_.size() - pos_; }

private:
  size_t limit_;
  bool allow_empty_;
  std::string buf_;
  size_t pos_ = 0;
  bool refused_ = false;
  uint32_t refused_len_ = 0;
};

}  // namespace proctor
