// The client protocol's framing: lengths big-endian, frames split and joined however the
// bytes arrive, bad lengths refused.
#include "actors/wire/wire_frame.hpp"

#include <gtest/gtest.h>

namespace proctor {
namespace {

TEST(wire_frame, the_header_is_the_length_big_endian) {
  auto f = make_frame("abc");
  ASSERT_EQ(f.size(), 7u);
  EXPECT_EQ(f.substr(0, 4), std::string("\0\0\0\3", 4));
  EXPECT_EQ(frame_length(make_frame(std::string(0x010203, 'x')).data()), 0x010203u);
  char h[4];
  put_frame_header(h, 0xA1B2C3D4u);
  EXPECT_EQ(static_cast<unsigned char>(h[0]), 0xA1);
  EXPECT_EQ(frame_length(h), 0xA1B2C3D4u);
}

TEST(wire_frame, a_reader_joins_a_frame_split_across_reads) {
  auto f = make_frame("hello, node");
  frame_reader r;
  std::string out;
  for (size_t i = 0; i + 1 < f.size(); ++i) {
    r.append(f.substr(i, 1));
    ASSERT_EQ(r.next(&out), frame_reader::status::need_more) << "after " << i + 1 << " bytes";
  }
  r.append(f.substr(f.size() - 1));
  ASSERT_EQ(r.next(&out), frame_reader::status::frame);
  EXPECT_EQ(out, "hello, node");
  EXPECT_EQ(r.buffered(), 0u);
}

TEST(wire_frame, a_reader_splits_two_frames_in_one_read) {
  frame_reader r;
  r.append(make_frame("one") + make_frame("two") + make_frame("th"));
  std::string out;
  ASSERT_EQ(r.next(&out), frame_reader::status::frame);
  EXPECT_EQ(out, "one");
  ASSERT_EQ(r.next(&out), frame_reader::status::frame);
  EXPECT_EQ(out, "two");
  ASSERT_EQ(r.next(&out), frame_reader::status::frame);
  EXPECT_EQ(out, "th");
  EXPECT_EQ(r.next(&out), frame_reader::status::need_more);
}

TEST(wire_frame, empty_and_oversize_frames_are_refused_for_good) {
  frame_reader r{100};
  r.append(std::string("\0\0\0\0", 4));
  std::string out;
  EXPECT_EQ(r.next(&out), frame_reader::status::refused);
  EXPECT_EQ(r.refused_length(), 0u);
  r.append(make_frame("x"));
  EXPECT_EQ(r.next(&out), frame_reader::status::refused);

  frame_reader big{100};
  big.append(make_frame(std::string(101, 'x')).substr(0, 4));  // the header alone decides
  EXPECT_EQ(big.next(&out), frame_reader::status::refused);
  EXPECT_EQ(big.refused_length(), 101u);
  EXPECT_EQ(check_frame_length(100, 100), frame_check::ok);
  EXPECT_EQ(check_frame_length(0xFFFFFFFFu, SIZE_MAX), frame_check::too_large);
  EXPECT_EQ(describe_refused_frame(101, 100), "frame of 101 bytes exceeds the limit of 100 bytes");
}

// A Response of code OK with nothing else (an empty list) serializes to no bytes.
TEST(wire_frame, a_reply_reader_takes_an_empty_frame) {
  frame_reader r{max_frame_bytes, true};
  r.append(make_frame("") + make_frame("x"));
  std::string out = "stale";
  ASSERT_EQ(r.next(&out), frame_reader::status::frame);
  EXPECT_EQ(out, "");
  ASSERT_EQ(r.next(&out), frame_reader::status::frame);
  EXPECT_EQ(out, "x");
}

}  // namespace
}  // namespace proctor
