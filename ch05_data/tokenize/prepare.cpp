// Cached tokenization: compare the manifest with the input and settings, re-run the pipeline on any change.
#include "ch05_data/tokenize/prepare.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "ch05_data/tokenize/pipeline.h"
#include "common/core/error.h"
#include "common/io/files.h"
#include "common/io/shards.h"
#include "common/text/tokenizer.h"
#include "common/util/json.h"

namespace lab::ch05 {

namespace {

constexpr int kManifestFormat = 1;

// FNV-1a over the file, read in blocks: a fingerprint of the content, not a defence against tampering.
std::string content_hash(const std::string& path) {
  const InputFile file(path);
  uint64_t hash = 0xcbf29ce484222325ull;
  std::vector<unsigned char> block(size_t{1} << 20);
  for (int64_t offset = 0; offset < file.size();) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(block.size()), file.size() - offset));
    file.read_at(offset, block.data(), n);
    for (size_t i = 0; i < n; ++i) hash = (hash ^ block[i]) * 0x100000001b3ull;
    offset += static_cast<int64_t>(n);
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

// Everything the shards depend on; the cache is valid only for an identical object.
Json describe(const DatasetSpec& spec) {
  Json d = Json::object();
  d.set("format", kManifestFormat);
  d.set("input_bytes", file_size(spec.input));
  d.set("input_fnv1a64", content_hash(spec.input));
  d.set("tokenizer", "gpt2");
  d.set("doc_split", to_string(spec.doc_split));
  d.set("eot", spec.eot);
  d.set("val_fraction", spec.val_fraction);
  d.set("shard_tokens", spec.shard_tokens);
  return d;
}

// The shards of one split as the manifest lists them: file name -> token count.
Json list_shards(const std::vector<std::string>& paths) {
  Json list = Json::object();
  for (const auto& path : paths) {
    const size_t slash = path.rfind('/');
    list.set(slash == std::string::npos ? path : path.substr(slash + 1), read_shard_info(path).num_tokens);
  }
  return list;
}

std::vector<std::string> existing_shards(const std::string& pattern) {
  try {
    return expand_shard_pattern(pattern);
  } catch (const Error&) {
    return {};
  }
}

// True when the manifest describes `wanted` and every shard it lists is present, valid and alone in its split.
bool cache_is_valid(const std::string& manifest_path, const Json& wanted, const std::string& train_pattern,
                    const std::string& val_pattern) {
  try {
    if (!file_exists(manifest_path)) return false;
    const Json manifest = Json::parse(read_file(manifest_path));
    if (manifest.at("settings").dump() != wanted.dump()) return false;
    return manifest.at("train_shards").dump() == list_shards(existing_shards(train_pattern)).dump() &&
           manifest.at("val_shards").dump() == list_shards(existing_shards(val_pattern)).dump();
  } catch (const Error&) {
    return false;  // an unreadable manifest or a damaged shard: tokenize again
  }
}

}  // namespace

DatasetFiles prepare_dataset(const DatasetSpec& spec, const std::string& cache_dir) {
  LAB_CHECK(!spec.name.empty() && spec.name.find('/') == std::string::npos, InvalidArgument, "dataset name '",
            spec.name, "' must be a plain file name");
  LAB_CHECK(file_exists(spec.input), Io, "dataset input '", spec.input, "' does not exist");
  const std::string prefix = cache_dir + "/" + spec.name;
  const std::string manifest_path = prefix + ".manifest.json";
  const std::string train_pattern = prefix + "_train_*.bin", val_pattern = prefix + "_val_*.bin";

  const Json wanted = describe(spec);
  if (!cache_is_valid(manifest_path, wanted, train_pattern, val_pattern)) {
    TokenizeOptions options;
    options.inputs = {spec.input};
    options.doc_split = spec.doc_split;
    options.eot = spec.eot;
    options.val_fraction = spec.val_fraction;
    options.shard_tokens = spec.shard_tokens;
    options.out_prefix = prefix;
    const TokenizeStats stats = tokenize_to_shards(GPT2Tokenizer::load_default(), options);

    Json manifest = Json::object();
    manifest.set("settings", wanted);
    manifest.set("train_shards", list_shards(stats.train.shards));
    manifest.set("val_shards", list_shards(stats.val.shards));
    write_file_atomic(manifest_path, manifest.dump(2) + "\n");
    std::printf("tokenized %s into %s: %lld train + %lld val tokens (%lld + %lld documents) in %.2f s\n",
                spec.input.c_str(), cache_dir.c_str(), static_cast<long long>(stats.train.tokens),
                static_cast<long long>(stats.val.tokens), static_cast<long long>(stats.train.documents),
                static_cast<long long>(stats.val.documents), stats.seconds);
    std::fflush(stdout);
  }
  const bool has_val = !existing_shards(val_pattern).empty();
  return DatasetFiles{train_pattern, has_val ? val_pattern : std::string()};
}

DatasetFiles prepare_tinyshakespeare(const std::string& cache_dir) {
  DatasetSpec spec;
  spec.name = "tinyshakespeare";
  spec.input = bundled_data_path("tinyshakespeare.txt");
  spec.doc_split = DocSplit::BlankLine;
  spec.eot = true;
  spec.val_fraction = 0.1;
  return prepare_dataset(spec, cache_dir);
}

}  // namespace lab::ch05
