// The hand-written pre-tokenizer against pieces of the reference pattern (expected pieces from Python's
// `regex` module running GPT-2's pattern), and the split points used to chunk huge documents.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/text/pretokenizer.h"
#include "common/text/tokenizer.h"
#include "common/util/rng.h"

namespace lab::text {
namespace {

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  PreTokenizer splitter(text);
  for (std::string_view piece = splitter.next(); !piece.empty(); piece = splitter.next()) out.emplace_back(piece);
  return out;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, WordsKeepTheirLeadingSpace) {
  EXPECT_EQ(pieces("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces("abc123def"), (Pieces{"abc", "123", "def"}));
  EXPECT_EQ(pieces(" 123"), (Pieces{" 123"}));
}

TEST(PreTokenizer, SpaceRunsGiveTheirLastSpaceToTheNextWord) {
  EXPECT_EQ(pieces("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(pieces("a\t b"), (Pieces{"a", "\t", " b"}));
  EXPECT_EQ(pieces("a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));  // only U+0020 joins the next piece
  EXPECT_EQ(pieces("end  "), (Pieces{"end", "  "}));            // a trailing run stays whole
  EXPECT_EQ(pieces(" "), (Pieces{" "}));
}

TEST(PreTokenizer, ContractionsAreLowercaseAndOnlyStartAPiece) {
  EXPECT_EQ(pieces("x's 'S"), (Pieces{"x", "'s", " '", "S"}));
  EXPECT_EQ(pieces("?'s"), (Pieces{"?'", "s"}));  // the punctuation run swallows the apostrophe
  EXPECT_EQ(pieces("it's'"), (Pieces{"it", "'s", "'"}));
  EXPECT_EQ(pieces("don't"), (Pieces{"don", "'t"}));
  EXPECT_EQ(pieces(" 'll"), (Pieces{" '", "ll"}));
}

TEST(PreTokenizer, UnicodeWhiteSpaceProperty) {
  EXPECT_EQ(pieces("a\u00a0b"), (Pieces{"a", "\u00a0", "b"}));
  EXPECT_EQ(pieces("a \u00a0b"), (Pieces{"a", " ", "\u00a0", "b"}));
  EXPECT_EQ(pieces("  \u3000x"), (Pieces{"  ", "\u3000", "x"}));
  EXPECT_EQ(pieces("x\u3000\u3000"), (Pieces{"x", "\u3000\u3000"}));
  // U+0085 is White_Space; U+FEFF and U+001C are not (JavaScript's \s and Python's isspace() disagree).
  EXPECT_EQ(pieces("a\u0085\u0085b"), (Pieces{"a", "\u0085", "\u0085", "b"}));
  EXPECT_EQ(pieces("a\ufeffb"), (Pieces{"a", "\ufeff", "b"}));
  EXPECT_EQ(pieces("a\x1c"
                   "b"),
            (Pieces{"a", "\x1c", "b"}));
}

TEST(PreTokenizer, CombiningMarksAreNotLetters) {
  EXPECT_EQ(pieces("e\u0301x"), (Pieces{"e", "\u0301", "x"}));
}

TEST(PreTokenizer, InvalidBytesArePunctuation) {
  EXPECT_EQ(pieces("hi \xff\xfe!"), (Pieces{"hi", " \xff\xfe!"}));
  EXPECT_EQ(pieces("a\x80"
                   "b"),
            (Pieces{"a", "\x80", "b"}));
  EXPECT_EQ(pieces("\xe4\xb8"), (Pieces{"\xe4\xb8"}));                // a truncated 3-byte sequence
  EXPECT_EQ(pieces("\xed\xa0\x80x"), (Pieces{"\xed\xa0\x80", "x"}));  // an encoded surrogate
  EXPECT_EQ(pieces("\xc0\xaf"), (Pieces{"\xc0\xaf"}));                // an overlong '/'
}

TEST(PreTokenizer, LastSplitPoint) {
  EXPECT_EQ(last_split_point("abc"), 0u);
  EXPECT_EQ(last_split_point("   "), 0u);
  EXPECT_EQ(last_split_point(""), 0u);
  EXPECT_EQ(last_split_point("ab cd"), 2u);
  EXPECT_EQ(last_split_point("ab cd\n"), 5u);
  EXPECT_EQ(last_split_point("ab cd  \n"), 5u);          // never inside a space run
  EXPECT_EQ(last_split_point("ab c\u00e9 \u00e9"), 2u);  // only after an ASCII character
}

// Cutting at last_split_point never changes the tokens, whatever follows the cut.
TEST(PreTokenizer, SplitPointKeepsTokensForAnyContinuation) {
  const GPT2Tokenizer tokenizer = GPT2Tokenizer::load_default();
  const std::vector<std::string> alphabet = {"a",      "b",      "Z",      "1",      "'",    "s", "re",
                                             " ",      "  ",     "\n",     "\n\n",   "\t",   "!", ".",
                                             "\u00e9", "\u4e2d", "\u00a0", "\u3000", "\xff", "'s"};
  Rng rng(7);
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string head, rest;
    for (int i = 0, n = 1 + static_cast<int>(rng.below(20)); i < n; ++i) head += alphabet[rng.below(alphabet.size())];
    for (int i = 0, n = static_cast<int>(rng.below(8)); i < n; ++i) rest += alphabet[rng.below(alphabet.size())];
    const size_t p = last_split_point(head);
    if (p == 0) continue;
    const std::string whole = head + rest;
    std::vector<int32_t> joined = tokenizer.encode(std::string_view(whole).substr(0, p));
    const std::vector<int32_t> tail = tokenizer.encode(std::string_view(whole).substr(p));
    joined.insert(joined.end(), tail.begin(), tail.end());
    EXPECT_EQ(joined, tokenizer.encode(whole)) << "cut at " << p << " of '" << whole << "'";
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace lab::text
