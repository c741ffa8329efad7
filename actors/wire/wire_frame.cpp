#include "actors/wire/wire_frame.hpp"

#include <algorithm>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

namespace proctor {

void put_frame_header(char* out, uint32_t len) {
  out[0] = static_cast<char>(len >> 24);
  out[1] = static_cast<char>(len >> 16);
  out[2] = static_cast<char>(len >> 8);
  out[3] = static_cast<char>(len);
}

uint32_t frame_length(const char* header) {
  auto b = [&](int i) { return static_cast<uint32_t>(static_cast<unsigned char>(header[i])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

std::string make_frame(std::string_view payload) {
  std::string out(frame_header_bytes + payload.size(), '\0');
  put_frame_header(out.data(), static_cast<uint32_t>(payload.size()));
  out.replace(frame_header_bytes, payload.size(), payload);
  return out;
}

std::string with_varint_field(std::string msg, int field, uint64_t value) {
  using google::protobuf::internal::WireFormatLite;
  {
    google::protobuf::io::StringOutputStream raw(&msg);
    google::protobuf::io::CodedOutputStream out(&raw);
    WireFormatLite::WriteUInt64(field, value, &out);
  }
  return msg;
}

frame_check check_frame_length(uint32_t len, size_t limit, bool allow_empty) {
  if (len == 0 && !allow_empty)
    return frame_check::empty;
  if (len > limit || len > max_frame_bytes)
    return frame_check::too_large;
  return frame_check::ok;
}

std::string describe_refused_frame(uint32_t len, size_t limit) {
  if (len == 0)
    return "empty frame (a request is never 0 bytes)";
  return "frame of " + std::to_string(len) + " bytes exceeds the limit of "
         + std::to_string(std::min(limit, max_frame_bytes)) + " bytes";
}

frame_reader::status frame_reader::next(std::string* payload) {
  if (refused_)
    return status::refused;
  if (buffered() < frame_header_bytes)
    return status::need_more;
  auto len = frame_length(buf_.data() + pos_);
  if (check_frame_length(len, limit_, allow_empty_) != frame_check::ok) {
    refused_ = true;
    refused_len_ = len;
    return status::refused;
  }
  if (buffered() < frame_header_bytes + len)
    return status::need_more;
  payload->assign(buf_, pos_ + frame_header_bytes, len);
  pos_ += frame_header_bytes + len;
  // Drop consumed bytes once they are most of the buffer: amortized O(1) per byte.
  if (pos_ > buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return status::frame;
}

}  // namespace proctor
