// Byte-pair merging: the ranked merge list of a BPE vocabulary, applied to one pre-tokenized piece.
//
// The reference algorithm repeatedly takes the adjacent pair of lowest rank and merges all its occurrences
// from left to right. We get the same result in O(n log n) with a heap of candidate pairs ordered by
// (rank, position): the occurrences of the lowest-ranked pair pop left to right, and every pair a merge
// creates ranks higher than the merge itself (load-time check: a merge only uses tokens that earlier
// merges made), so the next rank is taken up only after the current one is exhausted, as in the reference.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace lab::text {

class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t result;  // id of the merged token
  };

  // Adds the merge of rank size(): left + right -> result (a pair listed again keeps its first rank).
  void add(int32_t left, int32_t right, int32_t result);
  const Merge* find(int32_t left, int32_t right) const;
  int32_t size() const { return static_cast<int32_t>(merges_.size()); }

  // Merges the token ids of one piece in place until no listed pair remains.
  void apply(std::vector<int32_t>& tokens) const;

 private:
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace lab::text
