// Strict UTF-8 decoding of one code point (Unicode, Table 3-7 "Well-Formed UTF-8 Byte Sequences").
//
// Overlong forms, surrogates (U+D800..U+DFFF) and values above U+10FFFF are not well-formed; the tokenizer
// treats each byte of such a sequence as a character of its own, so no input is ever rejected.
#pragma once

#include <cstddef>
#include <string_view>

namespace lab::text {

// The length (1..4) of the well-formed sequence that starts at text[pos], storing its code point in *cp;
// 0 when the byte at pos does not start one (cp is then left alone).
inline int decode_utf8(std::string_view text, size_t pos, char32_t* cp) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned b0 = byte(pos);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  // The lead byte fixes the length and the allowed range of the second byte (this is what excludes
  // overlong forms, surrogates and values past U+10FFFF); every later byte is 0x80..0xBF.
  int length = 0;
  unsigned second_lo = 0x80, second_hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) second_lo = 0xA0;
    if (b0 == 0xED) second_hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) second_lo = 0x90;
    if (b0 == 0xF4) second_hi = 0x8F;
  } else {
    return 0;
  }
  if (pos + length > text.size()) return 0;
  if (byte(pos + 1) < second_lo || byte(pos + 1) > second_hi) return 0;
  char32_t value = b0 & (0x7F >> length);
  for (int i = 1; i < length; ++i) {
    const unsigned b = byte(pos + i);
    if (b < 0x80 || b > 0xBF) return 0;
    value = (value << 6) | (b & 0x3F);
  }
  *cp = value;
  return length;
}

}  // namespace lab::text
