// GPT-2's pre-tokenizer, written out by hand: it splits text into the pieces that the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matches, one after another, exactly as the reference regex engine does. BPE then runs inside each piece.
//
// Bytes that are not well-formed UTF-8 are characters of class Other (not a letter, number or space), one
// byte each, so every byte of the input lands in exactly one piece and the pieces concatenate to the input.
#pragma once

#include <cstddef>
#include <string_view>

namespace lab::text {

class PreTokenizer {
 public:
  explicit PreTokenizer(std::string_view text) : text_(text) {}

  // The next piece (a view into the text), or an empty view once the text is used up.
  std::string_view next();

 private:
  size_t contraction_end(size_t pos) const;  // end of 's 't 're 've 'm 'll 'd at pos, or 0
  size_t whitespace_end(size_t pos) const;   // end of \s+(?!\S)|\s+ at pos

  std::string_view text_;
  size_t pos_ = 0;
};

// The largest position p in (0, text.size()) at which the text can be cut without changing its tokens:
// encode(text[0, p)) followed by encode(rest) equals encode(text + rest) for ANY continuation `rest`
// of the text. 0 when there is none. Used to split huge documents into chunks that tokenize in parallel.
//
// p qualifies when text[p-1] is a printable ASCII character and text[p] is ASCII white space: no alternative
// of the pattern matches a non-space character followed by a space, so a piece always ends at p; the pieces
// before p never look past it (the only look-ahead, (?!\S), follows a space run, and the last character
// before p is not a space); and matching after p starts afresh, because the pattern has no look-behind.
size_t last_split_point(std::string_view text);

}  // namespace lab::text
