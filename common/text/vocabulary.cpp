// Loading encoder.json and vocab.bpe into raw-byte tokens and a merge table, validating as we go.
#include "common/text/vocabulary.h"

#include <string_view>
#include <unordered_map>

#include "common/core/error.h"
#include "common/io/files.h"
#include "common/text/utf8.h"
#include "common/util/json.h"

namespace lab::text {

namespace {

// GPT-2's bytes_to_unicode(): the character that stands for each byte in the vocabulary files.
// Printable Latin-1 bytes stand for themselves; the other 68 bytes take U+0100, U+0101, ... in byte order.
std::array<char32_t, 256> byte_to_char() {
  std::array<char32_t, 256> table{};
  char32_t next_extra = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    table[b] = printable ? static_cast<char32_t>(b) : next_extra++;
  }
  return table;
}

// The inverse, as a lookup over the 324 code points the alphabet uses (-1 for the rest).
class ByteAlphabet {
 public:
  ByteAlphabet() {
    byte_of_.fill(-1);
    const std::array<char32_t, 256> chars = byte_to_char();
    for (int b = 0; b < 256; ++b) byte_of_[chars[b]] = b;
  }

  // The raw bytes a token spells, or false when it uses a character outside the alphabet.
  bool to_bytes(std::string_view token, std::string* bytes) const {
    bytes->clear();
    for (size_t pos = 0; pos < token.size();) {
      char32_t cp = 0;
      const int length = decode_utf8(token, pos, &cp);
      if (length == 0 || cp >= byte_of_.size() || byte_of_[cp] < 0) return false;
      bytes->push_back(static_cast<char>(byte_of_[cp]));
      pos += length;
    }
    return true;
  }

 private:
  std::array<int, 0x100 + 68> byte_of_{};
};

// Fills token_bytes from encoder.json and returns the bytes -> id map the merges are resolved with.
std::unordered_map<std::string, int32_t> read_encoder(const std::string& path, const ByteAlphabet& alphabet,
                                                      Vocabulary* vocab) {
  Json json;
  try {
    json = Json::parse(read_file(path));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Format) throw;
    fail(ErrorKind::Format, "encoder '", path, "': ", e.what());
  }
  LAB_CHECK(json.is_object() && json.size() > 0, Format, "encoder '", path, "': expected a non-empty JSON object");
  const int64_t count = static_cast<int64_t>(json.size());
  LAB_CHECK(count <= 65536, Format, "encoder '", path, "': ", count, " tokens do not fit 16-bit token ids");

  std::unordered_map<std::string, int32_t> id_of;
  vocab->token_bytes.assign(count, std::string());
  std::vector<bool> seen(count, false);
  std::string bytes;
  for (const auto& [token, value] : json.as_object()) {
    LAB_CHECK(value.is_number() && value.as_number() >= 0 && value.as_number() < static_cast<double>(count) &&
                  value.as_number() == static_cast<double>(static_cast<int64_t>(value.as_number())),
              Format, "encoder '", path, "': token \"", token, "\" has id ", value.dump(), ", expected 0..", count - 1);
    const int32_t id = static_cast<int32_t>(value.as_int());
    LAB_CHECK(!seen[id], Format, "encoder '", path, "': id ", id, " is used twice");
    LAB_CHECK(alphabet.to_bytes(token, &bytes), Format, "encoder '", path, "': token \"", token,
              "\" has a character outside GPT-2's byte alphabet");
    LAB_CHECK(id_of.emplace(bytes, id).second, Format, "encoder '", path, "': token \"", token,
              "\" spells the same bytes as another token");
    seen[id] = true;
    vocab->token_bytes[id] = bytes;
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(std::string(1, static_cast<char>(b)));
    LAB_CHECK(it != id_of.end(), Format, "encoder '", path, "': no token for the single byte ", b);
    vocab->byte_token[b] = it->second;
  }
  return id_of;
}

void read_merges(const std::string& path, const ByteAlphabet& alphabet,
                 const std::unordered_map<std::string, int32_t>& id_of, Vocabulary* vocab) {
  struct Line {
    size_t number;
    int32_t left, right, merged;
  };
  const std::string text = read_file(path);
  std::vector<Line> lines;
  std::string left_bytes, right_bytes;
  size_t line_no = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    ++line_no;
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;

    const size_t space = line.find(' ');
    LAB_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                  line.find(' ', space + 1) == std::string_view::npos,
              Format, "merges '", path, "' line ", line_no, ": expected two tokens separated by one space");
    LAB_CHECK(alphabet.to_bytes(line.substr(0, space), &left_bytes) &&
                  alphabet.to_bytes(line.substr(space + 1), &right_bytes),
              Format, "merges '", path, "' line ", line_no, ": a character outside GPT-2's byte alphabet");
    const auto left = id_of.find(left_bytes), right = id_of.find(right_bytes),
               merged = id_of.find(left_bytes + right_bytes);
    LAB_CHECK(left != id_of.end() && right != id_of.end() && merged != id_of.end(), Format, "merges '", path, "' line ",
              line_no, ": the merge uses or makes a token that encoder.json lacks");
    lines.push_back(Line{line_no, left->second, right->second, merged->second});
  }
  LAB_CHECK(!lines.empty(), Format, "merges '", path, "': no merges");

  // The heap-based merging in bpe.cpp relies on every merge using only tokens that earlier merges made
  // (see bpe.h), so check that order: the rank that creates each token, then each merge's parts against it.
  std::vector<int32_t> created_at(vocab->token_bytes.size(), -1);  // -1: a single byte, or never created
  for (size_t rank = 0; rank < lines.size(); ++rank) {
    LAB_CHECK(created_at[lines[rank].merged] < 0, Format, "merges '", path, "' line ", lines[rank].number,
              ": makes a token that an earlier merge already makes (a repeated pair?)");
    created_at[lines[rank].merged] = static_cast<int32_t>(rank);
  }
  for (size_t rank = 0; rank < lines.size(); ++rank) {
    const Line& m = lines[rank];
    LAB_CHECK(created_at[m.left] < static_cast<int32_t>(rank) && created_at[m.right] < static_cast<int32_t>(rank),
              Format, "merges '", path, "' line ", m.number, ": uses a token that only a later merge makes");
    vocab->merges.add(m.left, m.right, m.merged);
  }
}

}  // namespace

Vocabulary read_vocabulary(const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
  const ByteAlphabet alphabet;
  Vocabulary vocab;
  const auto id_of = read_encoder(encoder_json_path, alphabet, &vocab);
  read_merges(vocab_bpe_path, alphabet, id_of, &vocab);
  return vocab;
}

}  // namespace lab::text
