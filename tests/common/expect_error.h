// Test helpers for the error contract: a bad input gives one lab::Error of the right kind whose message
// names what was wrong (the file, the tensor, expected vs found).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <string>

#include "common/core/error.h"

namespace lab::testing {

// Runs `body`, expects it to throw lab::Error of `kind`, and expects every string of `parts` in the message.
// Returns the message so a test can check more.
template <typename Body>
std::string expect_error(Body&& body, ErrorKind kind, std::initializer_list<std::string> parts = {}) {
  try {
    body();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.kind(), kind) << "message: " << message;
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "expected '" << part << "' in: " << message;
    return message;
  }
  ADD_FAILURE() << "expected a lab::Error (" << to_string(kind) << "), but nothing was thrown";
  return {};
}

// A fresh, empty directory for the running test under the build tree: <build>/test_scratch/<suite>.<test>.
inline std::string scratch_directory() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir = std::filesystem::path(LAB_BINARY_DIR) / "test_scratch" /
                                    (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace lab::testing
