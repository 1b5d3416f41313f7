// Token shards: validated positioned reads, atomic writes, glob expansion (file handling from files.h).
//
// Every read re-checks the header against the file size, so a shard truncated or replaced after it was
// first listed is still caught, and every message names the file it is about.
#include "common/io/shards.h"

#include <glob.h>

#include <algorithm>
#include <bit>
#include <fstream>
#include <limits>

#include "common/core/error.h"
#include "common/io/files.h"

namespace lab {

namespace {

static_assert(std::endian::native == std::endian::little, "shards are little-endian; this host is not");

// Whether a file's first bytes read as text (no control character but tab, CR and LF; UTF-8's multi-byte
// sequences pass): what a user who gives a .txt file where shards belong has given. A shard's header is binary
// from its first bytes (the magic 20240520 is 58 1B 35 01).
bool looks_like_text(const void* bytes, size_t size) {
  const auto* b = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < size; ++i)
    if (b[i] < 0x20 && b[i] != '\n' && b[i] != '\r' && b[i] != '\t') return false;
  return true;
}

// Validates the header of an open shard against its size; returns the token count.
int64_t validate_header(const InputFile& file) {
  const std::string& path = file.path();
  int32_t header[kShardHeaderInts] = {};
  const size_t head_bytes = static_cast<size_t>(std::min<int64_t>(file.size(), kShardHeaderBytes));
  file.read_at(0, header, head_bytes);
  if (head_bytes > 0 && header[0] != kShardMagic && looks_like_text(header, head_bytes))
    fail(ErrorKind::Format, "shard '", path, "' looks like text, not a token shard: tokenize it first, e.g. ",
         "gpt2_tokenize --input ", path, " --doc-split blank-line --out-prefix data/cache/mytext, then train with ",
         "--data-train 'data/cache/mytext_train_*.bin' --data-val 'data/cache/mytext_val_*.bin'");
  LAB_CHECK(file.size() >= kShardHeaderBytes, Format, "shard '", path, "' is ", file.size(),
            " bytes, shorter than its ", kShardHeaderBytes, "-byte header");
  LAB_CHECK(header[0] == kShardMagic, Format, "shard '", path, "': bad magic ", header[0], " (expected ", kShardMagic,
            ")");
  LAB_CHECK(header[1] == kShardVersion, Format, "shard '", path, "': unsupported version ", header[1], " (expected ",
            kShardVersion, ")");
  const int64_t count = header[2];
  LAB_CHECK(count >= 0, Format, "shard '", path, "': negative token count ", count);
  const int64_t expected_bytes = kShardHeaderBytes + 2 * count;
  LAB_CHECK(file.size() == expected_bytes, Format, "shard '", path, "': the header says ", count, " tokens (",
            expected_bytes, " bytes) but the file is ", file.size(), " bytes");
  return count;
}

}  // namespace

ShardInfo read_shard_info(const std::string& path) {
  const InputFile file(path);
  return ShardInfo{path, validate_header(file)};
}

std::vector<uint16_t> read_shard(const std::string& path) {
  const InputFile file(path);
  std::vector<uint16_t> tokens(static_cast<size_t>(validate_header(file)));
  file.read_at(kShardHeaderBytes, tokens.data(), tokens.size() * sizeof(uint16_t));
  return tokens;
}

void read_shard_tokens(const std::string& path, int64_t offset, int64_t count, uint16_t* out) {
  const InputFile file(path);
  const int64_t available = validate_header(file);
  LAB_CHECK(offset >= 0 && count >= 0 && offset <= available && count <= available - offset, Format, "shard '", path,
            "': cannot read ", count, " tokens at offset ", offset, ", it holds ", available);
  file.read_at(kShardHeaderBytes + 2 * offset, out, static_cast<size_t>(count) * sizeof(uint16_t));
}

bool looks_like_shard(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  int32_t head[2] = {};
  if (!in.read(reinterpret_cast<char*>(head), sizeof(head))) return false;
  return head[0] == kShardMagic && head[1] == kShardVersion;
}

void write_shard(const std::string& path, std::span<const uint16_t> tokens) {
  LAB_CHECK(tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), InvalidArgument, "shard '", path,
            "': ", tokens.size(), " tokens do not fit the header's int32 count");
  int32_t header[kShardHeaderInts] = {};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  AtomicOutputFile file(path);
  file.write(header, sizeof(header));
  file.write(tokens.data(), tokens.size_bytes());
  file.commit();
}

std::vector<std::string> expand_shard_pattern(const std::string& pattern) {
  glob_t matches{};
  const int rc = ::glob(pattern.c_str(), GLOB_MARK, nullptr, &matches);
  std::vector<std::string> files;
  if (rc == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) {
      const std::string match = matches.gl_pathv[i];
      if (!match.ends_with('/')) files.push_back(match);  // GLOB_MARK flags directories with a '/'
    }
  }
  ::globfree(&matches);
  LAB_CHECK(rc == 0 || rc == GLOB_NOMATCH, Io, "cannot expand '", pattern, "': glob failed (", rc, ")");
  LAB_CHECK(!files.empty(), Io, "no file matches '", pattern, "'");
  std::sort(files.begin(), files.end());  // byte order, whatever the locale
  return files;
}

}  // namespace lab
