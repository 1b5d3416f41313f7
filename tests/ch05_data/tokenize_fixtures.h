// Helpers shared by the preprocessing tests: corpora written to a scratch directory, and an independent,
// whole-string reference for splitting documents and for the token streams the pipeline must produce.
#pragma once

#include <string>
#include <vector>

#include "ch05_data/tokenize/document_reader.h"
#include "ch05_data/tokenize/pipeline.h"
#include "common/io/files.h"
#include "common/io/shards.h"
#include "common/text/tokenizer.h"
#include "common/util/rng.h"

namespace lab::ch05::testing {

inline const GPT2Tokenizer& tokenizer() {
  static const GPT2Tokenizer instance = GPT2Tokenizer::load_default();
  return instance;
}

// The documents of whole texts, split the simple way (the reader streams; this does not).
inline std::vector<std::string> reference_documents(const std::vector<std::string>& texts, DocSplit split) {
  std::vector<std::string> docs;
  for (const std::string& text : texts) {
    if (split == DocSplit::File) {
      if (!text.empty()) docs.push_back(text);
      continue;
    }
    const std::string separator = split == DocSplit::BlankLine ? "\n\n" : "\n";
    size_t pos = text.find_first_not_of('\n');
    while (pos != std::string::npos && pos < text.size()) {
      const size_t at = text.find(separator, pos);
      docs.push_back(text.substr(pos, at == std::string::npos ? std::string::npos : at - pos));
      if (at == std::string::npos) break;
      pos = text.find_first_not_of('\n', at);
    }
  }
  return docs;
}

// The train and val token streams for those documents: end-of-text first if asked, val by is_val_document.
struct Streams {
  std::vector<uint16_t> train, val;
};

inline Streams reference_streams(const std::vector<std::string>& docs, bool eot, double val_fraction) {
  Streams out;
  for (size_t i = 0; i < docs.size(); ++i) {
    std::vector<uint16_t>& stream = is_val_document(static_cast<int64_t>(i), val_fraction) ? out.val : out.train;
    if (eot) stream.push_back(GPT2Tokenizer::kEndOfText);
    for (const int32_t id : tokenizer().encode(docs[i])) stream.push_back(static_cast<uint16_t>(id));
  }
  return out;
}

// All tokens of the given shards, in order.
inline std::vector<uint16_t> concatenated(const std::vector<std::string>& shards) {
  std::vector<uint16_t> all;
  for (const auto& path : shards) {
    const std::vector<uint16_t> tokens = read_shard(path);
    all.insert(all.end(), tokens.begin(), tokens.end());
  }
  return all;
}

// A corpus of `paragraphs` random paragraphs of Shakespeare lines and tricky text, separated by runs of
// one to three empty lines, sometimes with a paragraph that is one very long line.
inline std::string make_corpus(uint64_t seed, int paragraphs) {
  static const std::string shakespeare = read_file(bundled_data_path("tinyshakespeare.txt"));
  const std::vector<std::string> extras = {"caf\u00e9 na\u00efve", "\u4e2d\u6587 \U0001F600", "  spaced  out  ",
                                           "tabs\tand\ttabs",      "don't 'S 123456",         "\xff\xfe invalid"};
  Rng rng(seed);
  std::string text;
  for (int p = 0; p < paragraphs; ++p) {
    const int lines = 1 + static_cast<int>(rng.below(6));
    for (int l = 0; l < lines; ++l) {
      if (rng.below(5) == 0) {
        text += extras[rng.below(extras.size())];
      } else {
        const size_t start = rng.below(shakespeare.size() - 200);
        const size_t line_start = shakespeare.find('\n', start) + 1;
        const size_t line_end = shakespeare.find('\n', line_start);
        text += shakespeare.substr(line_start, line_end - line_start);
      }
      if (rng.below(20) == 0) text += std::string(200, 'x') + " long line " + std::string(300, 'y');
      text += "\n";
    }
    text += std::string(1 + rng.below(3), '\n');
  }
  return text;
}

}  // namespace lab::ch05::testing
