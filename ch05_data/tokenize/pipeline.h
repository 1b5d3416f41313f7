// The preprocessing pipeline behind gpt2_tokenize: text files -> documents -> GPT-2 tokens -> shards.
//
//   DocumentReader (calling thread)  ->  N tokenizer threads  ->  in-order consumer (calling thread)
//   chunks of ~1 MiB of documents        GPT2Tokenizer::encode     routes each document to train or val,
//                                         (+ end-of-text first)     fills and writes shards atomically
//
// run_ordered (ordered_pool.h) keeps at most `window` chunks in flight and hands results back in input
// order, so memory is bounded whatever the input size and the shards are byte-identical for any thread
// count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ch05_data/tokenize/document_reader.h"
#include "common/text/tokenizer.h"

namespace lab::ch05 {

struct TokenizeOptions {
  std::vector<std::string> inputs;  // text files, read in this order
  DocSplit doc_split = DocSplit::File;
  bool eot = true;            // end-of-text (50256) before every document, as llm.c does
  double val_fraction = 0.1;  // share of documents that go to val, in [0, 1)
  int64_t shard_tokens = 10'000'000;
  std::string out_prefix;  // shards are <out_prefix>_train_000000.bin, ...; empty: count only
  int threads = 0;         // tokenizer threads; 0: one per core
  size_t chunk_bytes = size_t{1} << 20;
  int window = 0;         // chunks in flight; 0: 4 per thread
  bool progress = false;  // a progress line on stderr every few seconds
};

struct SplitStats {
  int64_t documents = 0;
  int64_t tokens = 0;
  std::vector<std::string> shards;
};

struct TokenizeStats {
  int threads = 0;
  int64_t bytes = 0;  // of input text
  SplitStats train, val;
  double seconds = 0;

  double megabytes_per_second() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
  double tokens_per_second() const { return seconds > 0 ? (train.tokens + val.tokens) / seconds : 0; }
};

// One tokenizer thread per core.
int default_threads();

// Document i goes to val iff floor((i+1) * F) > floor(i * F): streaming, deterministic, and exactly
// floor(n * F) of the first n documents are val ones, spread evenly (F = 0.1: documents 9, 19, 29, ...).
bool is_val_document(int64_t index, double val_fraction);

// Files named by a comma-separated list of paths and glob patterns, in list order (each pattern's matches
// sorted). Error(Io) naming the entry for a missing file or a pattern that matches nothing.
std::vector<std::string> expand_inputs(const std::string& list);

// Checks the options and the output directory (created if missing; Error(Io) naming it when it cannot be
// written) before any work, then runs the pipeline.
TokenizeStats tokenize_to_shards(const GPT2Tokenizer& tokenizer, const TokenizeOptions& options);

}  // namespace lab::ch05
