// Token shards of a text corpus, tokenized on first use and cached.
//
// prepare_tinyshakespeare() is what the trainer calls when given no data: it tokenizes the bundled
// data/tinyshakespeare.txt (blank-line documents, end-of-text before each, 10% of the documents to val)
// into `cache_dir` the first time, and afterwards returns the cached shards at once. A small manifest in
// the cache records the input's size and content hash and the settings; any difference, or a missing or
// damaged shard, makes it tokenize again. It prints one line when it tokenizes, nothing otherwise.
//
// Several processes may call it at once (ranks of one job): each then writes the same bytes, atomically,
// so readers never see a partial shard; calling it on one rank before a barrier avoids the repeated work.
#pragma once

#include <cstdint>
#include <string>

#include "ch05_data/tokenize/document_reader.h"

namespace lab::ch05 {

struct DatasetFiles {
  std::string train_pattern, val_pattern;  // glob patterns for expand_shard_pattern; val empty: no val shards
};

// What to tokenize and how; the cache holds <cache_dir>/<name>_{train,val}_NNNNNN.bin and <name>.manifest.json.
struct DatasetSpec {
  std::string name;
  std::string input;  // one text file
  DocSplit doc_split = DocSplit::BlankLine;
  bool eot = true;
  double val_fraction = 0.1;
  int64_t shard_tokens = 10'000'000;
};

DatasetFiles prepare_dataset(const DatasetSpec& spec, const std::string& cache_dir);

DatasetFiles prepare_tinyshakespeare(const std::string& cache_dir);

}  // namespace lab::ch05
