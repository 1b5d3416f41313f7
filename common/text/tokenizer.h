// GPT-2's byte-level BPE tokenizer, built from encoder.json + vocab.bpe.
//
// encode() gives the ids of the reference GPT-2 tokenizer on any UTF-8 input, including its original
// pre-tokenization pattern ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+).
// Bytes that are not valid UTF-8 are tokenized too (as their own bytes) and decode() restores them:
// decode(encode(x)) == x for every byte string x.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lab {

class GPT2Tokenizer {
 public:
  static constexpr int32_t kEndOfText = 50256;  // "<|endoftext|>"

  // Loads the vocabulary; throws Error(Io / Format) naming the file on any problem.
  static GPT2Tokenizer load(const std::string& encoder_json_path, const std::string& vocab_bpe_path);
  // The vocabulary bundled with the repository (data/gpt2_encoder.json, data/gpt2_vocab.bpe).
  static GPT2Tokenizer load_default();

  GPT2Tokenizer(GPT2Tokenizer&&) noexcept;
  GPT2Tokenizer& operator=(GPT2Tokenizer&&) noexcept;
  ~GPT2Tokenizer();

  // Thread-safe (const): several threads may encode with one tokenizer.
  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(std::span<const int32_t> ids) const;  // throws InvalidArgument on an unknown id
  std::string token_bytes(int32_t id) const;               // the raw bytes of one token
  int32_t vocab_size() const;                              // 50257 for GPT-2

 private:
  struct Impl;
  explicit GPT2Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Path of a file in the repository's data/ folder (compiled in; LAB_DATA_DIR overrides it at run time).
std::string bundled_data_path(const std::string& file_name);

}  // namespace lab
