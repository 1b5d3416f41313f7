// gpt2_tokenize: text files -> GPT-2 token shards (llm.c format), on all cores, with ordered output.
//
//   gpt2_tokenize --input data/tinyshakespeare.txt --doc-split blank-line --out-prefix data/cache/shakespeare
//   gpt2_tokenize --input 'corpus/*.txt' --out-prefix out/corpus --shard-tokens 100000000
//   gpt2_tokenize --input big.txt --doc-split line --threads 8 --scaling      (throughput for 1..8 threads)
//   echo "Hello world" | gpt2_tokenize --print-ids                            (prints "15496 995 198")
//
// See ch05_data/README.md, "Preprocessing: gpt2_tokenize", for what each option does and measured numbers.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "ch05_data/tokenize/pipeline.h"
#include "common/core/error.h"
#include "common/text/tokenizer.h"
#include "common/util/flags.h"
#include "common/util/main.h"

namespace lab::ch05 {
namespace {

int print_ids(const GPT2Tokenizer& tokenizer) {
  const std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  const std::vector<int32_t> ids = tokenizer.encode(text);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

void print_split(const char* name, const SplitStats& split) {
  std::printf("%-6s %lld documents, %lld tokens, %zu shard(s)", name, static_cast<long long>(split.documents),
              static_cast<long long>(split.tokens), split.shards.size());
  if (!split.shards.empty()) {
    std::printf(": %s", split.shards.front().c_str());
    if (split.shards.size() > 1) std::printf(" .. %s", split.shards.back().c_str());
  }
  std::printf("\n");
}

// Throughput for 1, 2, ..., N threads on the same input (count only, nothing written): the median of
// `repeats` runs each, after one warm-up run that brings the input into the page cache. The CPU time of the
// process per run is printed beside the wall time: when it stays flat while the wall time does not shrink,
// the threads were waiting for cores (other programs), not for each other.
void run_scaling(const GPT2Tokenizer& tokenizer, TokenizeOptions options, int max_threads, int repeats) {
  options.out_prefix.clear();
  options.progress = false;
  options.threads = max_threads;
  tokenize_to_shards(tokenizer, options);
  std::printf("%-8s %10s %10s %12s %9s %10s\n", "threads", "seconds", "MB/s", "Mtokens/s", "speedup", "cpu s");
  double one_thread_seconds = 0;
  for (int threads = 1; threads <= max_threads; ++threads) {
    options.threads = threads;
    std::vector<std::pair<TokenizeStats, double>> runs;  // with the CPU seconds of each run
    for (int r = 0; r < repeats; ++r) {
      const std::clock_t cpu_start = std::clock();
      const TokenizeStats stats = tokenize_to_shards(tokenizer, options);
      runs.emplace_back(stats, static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
    }
    std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.first.seconds < b.first.seconds; });
    const auto& [median, cpu_seconds] = runs[runs.size() / 2];
    if (threads == 1) one_thread_seconds = median.seconds;
    std::printf("%-8d %10.3f %10.2f %12.3f %8.2fx %10.3f   (wall min %.3f s, max %.3f s)\n", threads, median.seconds,
                median.megabytes_per_second(), median.tokens_per_second() / 1e6, one_thread_seconds / median.seconds,
                cpu_seconds, runs.front().first.seconds, runs.back().first.seconds);
  }
}

int run(int argc, char** argv) {
  std::string input, out_prefix, doc_split = "file";
  bool eot = true, scaling = false, print_ids_only = false, progress = true;
  double val_fraction = 0.1;
  int64_t shard_tokens = 10'000'000, threads = 0, chunk_bytes = int64_t{1} << 20, window = 0, repeats = 3;

  Flags flags("gpt2_tokenize",
              "Tokenizes text files with GPT-2's BPE into llm.c token shards <out-prefix>_{train,val}_NNNNNN.bin.");
  flags.add_string("input", &input, "text files: comma-separated paths and glob patterns, read in order");
  flags.add_string("out-prefix", &out_prefix, "output path prefix, e.g. out/corpus -> out/corpus_train_000000.bin");
  flags.add_choice("doc-split", &doc_split, {"file", "blank-line", "line"},
                   "documents are whole files, paragraphs between empty lines, or lines");
  flags.add_bool("eot", &eot, "end-of-text token (50256) before every document");
  flags.add_float("val-fraction", &val_fraction,
                  "share of documents for val: document i is val iff "
                  "floor((i+1)F) > floor(iF)",
                  0.0, 1.0);
  flags.add_int("shard-tokens", &shard_tokens, "tokens per shard (the last shard of a split holds the rest)", 1,
                2147483647);
  flags.add_int("threads", &threads, "tokenizer threads; 0 = one per core", 0, 1024);
  flags.add_int("chunk-bytes", &chunk_bytes, "bytes of text per unit of parallel work", 1, int64_t{1} << 30);
  flags.add_int("window", &window, "chunks in flight at most (bounds memory); 0 = 4 per thread", 0, 1 << 20);
  flags.add_bool("progress", &progress, "a progress line on stderr every 2 seconds");
  flags.add_bool("scaling", &scaling, "measure throughput for 1..threads threads instead of writing shards");
  flags.add_int("repeats", &repeats, "runs per thread count with --scaling (the median is reported)", 1, 100);
  flags.add_bool("print-ids", &print_ids_only, "print the ids of the UTF-8 text on stdin on one line and exit");
  if (!flags.parse(argc, argv)) return 0;

  if (print_ids_only) return print_ids(GPT2Tokenizer::load_default());

  LAB_CHECK(!input.empty(), InvalidArgument, "--input is required (see --help)");
  LAB_CHECK(scaling || !out_prefix.empty(), InvalidArgument, "--out-prefix is required (see --help)");
  LAB_CHECK(val_fraction < 1.0, InvalidArgument, "--val-fraction: ", val_fraction, " must be below 1");
  TokenizeOptions options;
  options.inputs = expand_inputs(input);
  options.doc_split = parse_doc_split(doc_split);
  options.eot = eot;
  options.val_fraction = val_fraction;
  options.shard_tokens = shard_tokens;
  options.out_prefix = out_prefix;
  options.threads = static_cast<int>(threads);
  options.chunk_bytes = static_cast<size_t>(chunk_bytes);
  options.window = static_cast<int>(window);
  options.progress = progress;

  const GPT2Tokenizer tokenizer = GPT2Tokenizer::load_default();
  if (scaling) {
    run_scaling(tokenizer, options, threads > 0 ? static_cast<int>(threads) : default_threads(),
                static_cast<int>(repeats));
    return 0;
  }
  const TokenizeStats stats = tokenize_to_shards(tokenizer, options);
  std::printf("input  %zu file(s), %.2f MB, doc-split %s, eot %s, %d thread(s)\n", options.inputs.size(),
              stats.bytes / 1e6, to_string(options.doc_split), eot ? "on" : "off", stats.threads);
  print_split("train", stats.train);
  print_split("val", stats.val);
  // A training run needs validation data: an empty split is most often one file read as one document.
  if (val_fraction > 0 && stats.val.documents == 0)
    std::fprintf(stderr,
                 "gpt2_tokenize: warning: the val split is empty: %lld document(s) in all, too few for "
                 "--val-fraction %g%s\n",
                 static_cast<long long>(stats.train.documents), val_fraction,
                 options.doc_split == DocSplit::File
                     ? " (--doc-split file makes each input file one document: give --doc-split blank-line or line)"
                     : "");
  std::printf("throughput %.2f MB/s of text, %.3f M tokens/s (%.3f s)\n", stats.megabytes_per_second(),
              stats.tokens_per_second() / 1e6, stats.seconds);
  return 0;
}

}  // namespace
}  // namespace lab::ch05

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, lab::ch05::run);
}
