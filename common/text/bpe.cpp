// Heap-driven BPE merging over a doubly linked list of symbols (see bpe.h for why it matches the reference).
#include "common/text/bpe.h"

#include <functional>
#include <queue>
#include <utility>

namespace lab::text {

void MergeTable::add(int32_t left, int32_t right, int32_t result) {
  merges_.emplace(key(left, right), Merge{size(), result});
}

const MergeTable::Merge* MergeTable::find(int32_t left, int32_t right) const {
  const auto it = merges_.find(key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void MergeTable::apply(std::vector<int32_t>& tokens) const {
  const int n = static_cast<int>(tokens.size());
  if (n < 2) return;
  // Symbol i keeps its slot; a merge grows the left symbol and unlinks the right one.
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  using Candidate = std::pair<int32_t, int>;  // (rank, position of the pair's left symbol)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto push_pair = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    if (const Merge* m = find(tokens[left], tokens[next[left]])) heap.emplace(m->rank, left);
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);

  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    const auto [rank, left] = heap.top();
    heap.pop();
    // A candidate is stale when its left symbol was absorbed or either neighbour changed since it was pushed;
    // the pair it names then no longer has this rank.
    if (!alive[left] || next[left] < 0) continue;
    const int right = next[left];
    const Merge* m = find(tokens[left], tokens[right]);
    if (m == nullptr || m->rank != rank) continue;

    tokens[left] = m->result;
    alive[right] = false;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    push_pair(prev[left]);
    push_pair(left);
  }

  int out = 0;
  for (int i = 0; i >= 0; i = next[i]) tokens[out++] = tokens[i];
  tokens.resize(out);
}

}  // namespace lab::text
