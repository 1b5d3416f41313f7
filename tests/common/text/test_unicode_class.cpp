// The generated character-class table: spot checks of each class, including the characters where the
// White_Space property differs from other definitions of "space".
#include <gtest/gtest.h>

#include <string>

#include "common/text/unicode_class.h"

namespace lab::text {
namespace {

TEST(UnicodeClass, AsciiClasses) {
  EXPECT_EQ(char_class(U'A'), CharClass::Letter);
  EXPECT_EQ(char_class(U'z'), CharClass::Letter);
  EXPECT_EQ(char_class(U'0'), CharClass::Number);
  EXPECT_EQ(char_class(U'9'), CharClass::Number);
  EXPECT_EQ(char_class(U' '), CharClass::Space);
  EXPECT_EQ(char_class(U'\t'), CharClass::Space);
  EXPECT_EQ(char_class(U'\r'), CharClass::Space);
  EXPECT_EQ(char_class(U'\''), CharClass::Other);
  EXPECT_EQ(char_class(U'_'), CharClass::Other);
  EXPECT_EQ(char_class(0x1C), CharClass::Other);  // isspace() in Python, but not White_Space
  EXPECT_EQ(char_class(0x7F), CharClass::Other);
}

TEST(UnicodeClass, BeyondAscii) {
  EXPECT_EQ(char_class(0x00E9), CharClass::Letter);   // é
  EXPECT_EQ(char_class(0x4E2D), CharClass::Letter);   // 中 (Lo)
  EXPECT_EQ(char_class(0x02B0), CharClass::Letter);   // modifier letter small h (Lm)
  EXPECT_EQ(char_class(0x0663), CharClass::Number);   // Arabic-Indic three (Nd)
  EXPECT_EQ(char_class(0x216B), CharClass::Number);   // Roman numeral twelve (Nl)
  EXPECT_EQ(char_class(0x00BD), CharClass::Number);   // ½ (No)
  EXPECT_EQ(char_class(0x0085), CharClass::Space);    // next line: White_Space
  EXPECT_EQ(char_class(0x00A0), CharClass::Space);    // no-break space
  EXPECT_EQ(char_class(0x3000), CharClass::Space);    // ideographic space
  EXPECT_EQ(char_class(0x200B), CharClass::Other);    // zero-width space is a format character
  EXPECT_EQ(char_class(0xFEFF), CharClass::Other);    // byte-order mark likewise
  EXPECT_EQ(char_class(0x0301), CharClass::Other);    // combining acute accent (Mn)
  EXPECT_EQ(char_class(0x1F600), CharClass::Other);   // 😀 (So)
  EXPECT_EQ(char_class(0x10FFFF), CharClass::Other);  // last code point, unassigned
}

TEST(UnicodeClass, TableIsSortedAndStartsAtZero) {
  ASSERT_GT(kCharClassRunCount, 100u);
  EXPECT_EQ(kCharClassRuns[0].first, 0u);
  for (size_t i = 1; i < kCharClassRunCount; ++i) {
    EXPECT_LT(kCharClassRuns[i - 1].first, kCharClassRuns[i].first) << "entry " << i;
    EXPECT_NE(kCharClassRuns[i - 1].cls, kCharClassRuns[i].cls) << "entry " << i << " does not start a new run";
  }
  EXPECT_FALSE(std::string(kUnicodeVersion).empty());
}

}  // namespace
}  // namespace lab::text
