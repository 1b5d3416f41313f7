// tokenize_to_shards: wires DocumentReader, run_ordered and two ShardWriters together (see pipeline.h).
#include "ch05_data/tokenize/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <thread>

#include "ch05_data/tokenize/ordered_pool.h"
#include "ch05_data/tokenize/shard_writer.h"
#include "common/core/error.h"
#include "common/io/files.h"
#include "common/io/shards.h"

namespace lab::ch05 {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A chunk's ids, and where each of its document pieces ends in them.
struct EncodedChunk {
  std::vector<DocumentPiece> pieces;
  std::vector<int32_t> ids;
  std::vector<size_t> piece_ends;
};

EncodedChunk encode_chunk(const GPT2Tokenizer& tokenizer, TextChunk& chunk, bool eot) {
  EncodedChunk out;
  out.ids.reserve(chunk.text.size() / 3);
  for (const DocumentPiece& piece : chunk.pieces) {
    if (piece.first && eot) out.ids.push_back(GPT2Tokenizer::kEndOfText);
    const std::vector<int32_t> ids = tokenizer.encode(std::string_view(chunk.text).substr(piece.offset, piece.size));
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.piece_ends.push_back(out.ids.size());
  }
  out.pieces = std::move(chunk.pieces);
  return out;
}

void check_options(const TokenizeOptions& o) {
  LAB_CHECK(!o.inputs.empty(), InvalidArgument, "no input files");
  LAB_CHECK(o.val_fraction >= 0 && o.val_fraction < 1, InvalidArgument, "val fraction ", o.val_fraction,
            " is outside [0, 1)");
  LAB_CHECK(o.shard_tokens >= 1 && o.shard_tokens <= std::numeric_limits<int32_t>::max(), InvalidArgument,
            "shard size ", o.shard_tokens, " tokens is outside [1, 2^31 - 1]");
  LAB_CHECK(o.threads >= 0 && o.window >= 0 && o.chunk_bytes >= 1, InvalidArgument,
            "threads, window and chunk size must not be negative");
  LAB_CHECK(o.out_prefix.empty() || !o.out_prefix.ends_with('/'), InvalidArgument, "output prefix '", o.out_prefix,
            "' names a directory; add a file name prefix, e.g. '", o.out_prefix, "corpus'");
}

// Creates the output directory if needed and proves it writable with a temporary file, so a bad output
// path fails at once rather than after the whole input has been tokenized.
void prepare_output_directory(const std::string& out_prefix) {
  const std::string dir = parent_directory(out_prefix);
  try {
    make_directories(dir);
    AtomicOutputFile probe(out_prefix + "_probe");  // removed again when it goes out of scope uncommitted
  } catch (const Error& e) {
    fail(ErrorKind::Io, "output directory '", dir, "' is not writable: ", e.what());
  }
}

}  // namespace

int default_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

bool is_val_document(int64_t index, double val_fraction) {
  return std::floor(static_cast<double>(index + 1) * val_fraction) >
         std::floor(static_cast<double>(index) * val_fraction);
}

std::vector<std::string> expand_inputs(const std::string& list) {
  std::vector<std::string> files;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    const std::string entry = list.substr(begin, end - begin);
    begin = end + 1;
    LAB_CHECK(!entry.empty(), InvalidArgument, "empty entry in the input list '", list, "'");
    if (entry.find_first_of("*?[") != std::string::npos) {
      const std::vector<std::string> matches = expand_shard_pattern(entry);
      files.insert(files.end(), matches.begin(), matches.end());
    } else {
      LAB_CHECK(file_exists(entry), Io, "input '", entry, "' does not exist");
      files.push_back(entry);
    }
  }
  return files;
}

TokenizeStats tokenize_to_shards(const GPT2Tokenizer& tokenizer, const TokenizeOptions& options) {
  check_options(options);
  TokenizeStats stats;
  stats.threads = options.threads > 0 ? options.threads : default_threads();
  const int window = options.window > 0 ? options.window : 4 * stats.threads;

  const bool writing = !options.out_prefix.empty();
  if (writing) prepare_output_directory(options.out_prefix);
  std::optional<ShardWriter> train_writer, val_writer;
  if (writing) {
    train_writer.emplace(options.out_prefix, "train", options.shard_tokens);
    val_writer.emplace(options.out_prefix, "val", options.shard_tokens);
  }
  DocumentReader reader(options.inputs, options.doc_split, options.chunk_bytes);

  const Clock::time_point start = Clock::now();
  Clock::time_point last_report = start;
  run_ordered<TextChunk, EncodedChunk>(
      stats.threads, window, [&](TextChunk* chunk) { return reader.next(chunk); },
      [&](TextChunk& chunk) { return encode_chunk(tokenizer, chunk, options.eot); },
      [&](EncodedChunk& encoded) {
        size_t begin = 0;
        for (size_t i = 0; i < encoded.pieces.size(); ++i) {
          const bool val = is_val_document(encoded.pieces[i].document, options.val_fraction);
          const std::span<const int32_t> ids(encoded.ids.data() + begin, encoded.piece_ends[i] - begin);
          begin = encoded.piece_ends[i];
          SplitStats& split = val ? stats.val : stats.train;
          split.documents += encoded.pieces[i].first ? 1 : 0;
          split.tokens += static_cast<int64_t>(ids.size());
          if (writing) (val ? val_writer : train_writer)->append(ids);
        }
        if (options.progress && seconds_since(last_report) >= 2.0) {
          last_report = Clock::now();
          const double seconds = seconds_since(start);
          std::fprintf(stderr, "  ... %.1f MB read, %lld tokens, %.2f MB/s\n", reader.bytes_read() / 1e6,
                       static_cast<long long>(stats.train.tokens + stats.val.tokens),
                       reader.bytes_read() / seconds / 1e6);
        }
      });
  if (writing) {
    train_writer->finish();
    val_writer->finish();
    stats.train.shards = train_writer->shards();
    stats.val.shards = val_writer->shards();
  }
  stats.seconds = seconds_since(start);
  stats.bytes = reader.bytes_read();
  return stats;
}

}  // namespace lab::ch05
