// GPT-2's pre-tokenization pattern as a hand-written scanner (see pretokenizer.h).
//
// At each position the alternatives of the pattern are tried in order, as a backtracking regex engine
// would. The classes of alternatives 2-4 (letter, number, other) do not overlap, so "an optional space,
// then a run of one class" is decided by the class of the first non-space character; the two white-space
// alternatives differ only when a run of spaces is followed by a non-space, where (?!\S) gives the last
// space of the run to the next piece (so " word" keeps its leading space).
#include "common/text/pretokenizer.h"

#include "common/text/unicode_class.h"
#include "common/text/utf8.h"

namespace lab::text {

namespace {

struct Char {
  CharClass cls;
  bool is_ascii_space;  // U+0020 itself: the optional leading space of alternatives 2-4
  size_t length;        // bytes
};

// The character at text[pos]; a byte that does not start well-formed UTF-8 is one character of class Other.
Char char_at(std::string_view text, size_t pos) {
  char32_t cp = 0;
  const int length = decode_utf8(text, pos, &cp);
  if (length == 0) return Char{CharClass::Other, false, 1};
  return Char{char_class(cp), cp == U' ', static_cast<size_t>(length)};
}

// The end of the run of characters of class `cls` that starts at pos.
size_t run_end(std::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    const Char c = char_at(text, pos);
    if (c.cls != cls) break;
    pos += c.length;
  }
  return pos;
}

}  // namespace

size_t PreTokenizer::contraction_end(size_t pos) const {
  if (text_[pos] != '\'' || pos + 1 >= text_.size()) return 0;
  const char a = text_[pos + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
  if (pos + 2 >= text_.size()) return 0;
  const std::string_view two = text_.substr(pos + 1, 2);
  if (two == "re" || two == "ve" || two == "ll") return pos + 3;
  return 0;
}

size_t PreTokenizer::whitespace_end(size_t pos) const {
  size_t last_start = pos;  // where the run's last character begins
  size_t end = pos;
  while (end < text_.size()) {
    const Char c = char_at(text_, end);
    if (c.cls != CharClass::Space) break;
    last_start = end;
    end += c.length;
  }
  // \s+(?!\S): the whole run at the end of the text; otherwise all but its last character, which needs a
  // run of two or more. A single space before a non-space falls through to the plain \s+.
  if (end == text_.size() || last_start == pos) return end;
  return last_start;
}

std::string_view PreTokenizer::next() {
  if (pos_ >= text_.size()) return {};
  const size_t start = pos_;
  size_t end = contraction_end(pos_);
  if (end == 0) {
    Char first = char_at(text_, pos_);
    size_t body = pos_;
    if (first.is_ascii_space && pos_ + 1 < text_.size()) {
      const Char second = char_at(text_, pos_ + 1);
      if (second.cls != CharClass::Space) {  // " ?" takes the space, the class run follows it
        first = second;
        body = pos_ + 1;
      }
    }
    end = first.cls == CharClass::Space ? whitespace_end(pos_) : run_end(text_, body, first.cls);
  }
  pos_ = end;
  return text_.substr(start, end - start);
}

size_t last_split_point(std::string_view text) {
  const auto is_ascii_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  const auto is_ascii_printable = [](char c) { return c > ' ' && c < 0x7F; };
  for (size_t p = text.size(); p-- > 1;) {
    if (is_ascii_space(text[p]) && is_ascii_printable(text[p - 1])) return p;
  }
  return 0;
}

}  // namespace lab::text
