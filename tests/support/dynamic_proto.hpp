// Test support: messages of a schema written in the test (a text-format FileDescriptorProto),
// built into a pool of their own with a dynamic factory, for tests of code that reads any
// message by reflection (procedures/proto_json_test.cpp, procedures/flat_json_test.cpp).
#pragma once

#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

namespace proctor::test {

struct dynamic_proto {
  google::protobuf::DescriptorPool pool;
  google::protobuf::DynamicMessageFactory factory{&pool};

  /// Adds the file of `descriptor` to the pool (a well-known type the schema imports).
  void import(const google::protobuf::FileDescriptor* file) {
    google::protobuf::FileDescriptorProto proto;
    file->CopyTo(&proto);
    ASSERT_NE(pool.BuildFile(proto), nullptr) << proto.name();
  }

  /// Builds the schema `text` and returns the prototype of its message `type`; null (with
  /// the test failed) when it does not parse or build.
  const google::protobuf::Message* load(const std::string& text, const std::string& type) {
    google::protobuf::FileDescriptorProto file;
    if (!google::protobuf::TextFormat::ParseFromString(text, &file)) {
      ADD_FAILURE() << "the test's schema does not parse";
      return nullptr;
    }
    if (pool.BuildFile(file) == nullptr) {
      ADD_FAILURE() << "the test's schema does not build";
      return nullptr;
    }
    const auto* d = pool.FindMessageTypeByName(type);
    if (d == nullptr) {
      ADD_FAILURE() << "no message " << type << " in the test's schema";
      return nullptr;
    }
    return factory.GetPrototype(d);
  }
};

}  // namespace proctor::test
