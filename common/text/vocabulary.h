// Reading GPT-2's vocabulary files: encoder.json (token string -> id) and vocab.bpe (the ranked merges).
//
// Both files spell tokens in GPT-2's "byte-level" alphabet, where every byte is one printable character
// (bytes that print as themselves keep their code point, the others are moved to U+0100 and up). We undo that
// mapping at load time, so the tokenizer itself works on raw bytes and token ids only.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/text/bpe.h"

namespace lab::text {

struct Vocabulary {
  std::vector<std::string> token_bytes;   // id -> the raw bytes of the token
  std::array<int32_t, 256> byte_token{};  // byte -> id of the token that is that single byte
  MergeTable merges;
};

// Throws Error(Io) when a file cannot be read and Error(Format), naming the file (and line), when its
// contents are not a consistent GPT-2 vocabulary.
Vocabulary read_vocabulary(const std::string& encoder_json_path, const std::string& vocab_bpe_path);

}  // namespace lab::text
