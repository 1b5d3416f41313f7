// GPT2Tokenizer: pre-tokenize (pretokenizer.h), then BPE inside each piece (bpe.h), with a per-thread cache
// of the ids of pieces already seen.
//
// Natural text repeats its words, so most pieces hit the cache and skip BPE. The cache belongs to the
// calling thread, not to the tokenizer: encode() stays const and needs no lock, and threads that share one
// tokenizer never contend. Each tokenizer has a serial number; a thread's cache is emptied when the thread
// moves on to another tokenizer (whose ids may differ) and when it grows past a fixed number of pieces.
#include "common/text/tokenizer.h"

#include <atomic>
#include <cstdlib>
#include <functional>
#include <unordered_map>

#include "common/core/error.h"
#include "common/text/pretokenizer.h"
#include "common/text/vocabulary.h"

namespace lab {

namespace {

constexpr size_t kCacheMaxPieces = size_t{1} << 17;
constexpr size_t kCacheMaxPieceBytes = 64;  // longer pieces are rare and would only bloat the cache

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct PieceCache {
  uint64_t owner = 0;  // serial number of the tokenizer the entries came from
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> ids;
};

PieceCache& thread_cache(uint64_t owner) {
  thread_local PieceCache cache;
  if (cache.owner != owner || cache.ids.size() >= kCacheMaxPieces) {
    cache.ids.clear();
    cache.owner = owner;
  }
  return cache;
}

std::atomic<uint64_t> g_next_serial{1};

}  // namespace

struct GPT2Tokenizer::Impl {
  text::Vocabulary vocab;
  uint64_t serial = g_next_serial.fetch_add(1);

  const std::string& bytes_of(int32_t id) const {
    const auto size = static_cast<int32_t>(vocab.token_bytes.size());
    LAB_CHECK(id >= 0 && id < size, InvalidArgument, "token id ", id, " is outside the vocabulary [0, ", size, ")");
    return vocab.token_bytes[id];
  }

  // Appends the ids of one pre-tokenized piece.
  void encode_piece(std::string_view piece, std::vector<int32_t>* out) const {
    if (piece.size() == 1) {
      out->push_back(vocab.byte_token[static_cast<unsigned char>(piece[0])]);
      return;
    }
    PieceCache& cache = thread_cache(serial);
    if (const auto it = cache.ids.find(piece); it != cache.ids.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
    std::vector<int32_t> tokens(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) tokens[i] = vocab.byte_token[static_cast<unsigned char>(piece[i])];
    vocab.merges.apply(tokens);
    out->insert(out->end(), tokens.begin(), tokens.end());
    if (piece.size() <= kCacheMaxPieceBytes) cache.ids.emplace(piece, std::move(tokens));
  }
};

GPT2Tokenizer::GPT2Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GPT2Tokenizer::GPT2Tokenizer(GPT2Tokenizer&&) noexcept = default;
GPT2Tokenizer& GPT2Tokenizer::operator=(GPT2Tokenizer&&) noexcept = default;
GPT2Tokenizer::~GPT2Tokenizer() = default;

GPT2Tokenizer GPT2Tokenizer::load(const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
  auto impl = std::make_unique<Impl>();
  impl->vocab = text::read_vocabulary(encoder_json_path, vocab_bpe_path);
  return GPT2Tokenizer(std::move(impl));
}

GPT2Tokenizer GPT2Tokenizer::load_default() {
  return load(bundled_data_path("gpt2_encoder.json"), bundled_data_path("gpt2_vocab.bpe"));
}

std::vector<int32_t> GPT2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);  // English averages about four bytes per token
  text::PreTokenizer pieces(text);
  for (std::string_view piece = pieces.next(); !piece.empty(); piece = pieces.next()) impl_->encode_piece(piece, &ids);
  return ids;
}

std::string GPT2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (const int32_t id : ids) text += impl_->bytes_of(id);
  return text;
}

std::string GPT2Tokenizer::token_bytes(int32_t id) const {
  return impl_->bytes_of(id);
}

int32_t GPT2Tokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->vocab.token_bytes.size());
}

std::string bundled_data_path(const std::string& file_name) {
  const char* override_dir = std::getenv("LAB_DATA_DIR");
  const std::string dir = override_dir != nullptr && override_dir[0] != '\0' ? override_dir : LAB_SOURCE_DIR "/data";
  return dir + "/" + file_name;
}

}  // namespace lab
