// contains.h: a substring check for messages that prints both strings when it fails.
#pragma once

#include <string>

#include <gtest/gtest.h>

namespace memopt::solver::testing {

inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\"\n  does not contain \"" << part << "\"";
}

}  // namespace memopt::solver::testing
