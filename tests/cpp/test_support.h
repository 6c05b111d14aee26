#pragma once
// Asserts that `statement` raises c10::Error whose message contains every given fragment.
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#define EXPECT_ERROR_MENTIONS(statement, ...)                                        \
  do {                                                                               \
    try {                                                                            \
      statement;                                                                     \
      ADD_FAILURE() << "expected c10::Error from: " #statement;                      \
    } catch (const c10::Error& error) {                                              \
      const std::string message = error.what_without_backtrace();                    \
      for (const char* fragment : std::initializer_list<const char*>{__VA_ARGS__}) { \
        EXPECT_NE(message.find(fragment), std::string::npos)                         \
            << "message lacks '" << fragment << "': " << message;                    \
      }                                                                              \
    }                                                                                \
  } while (false)
