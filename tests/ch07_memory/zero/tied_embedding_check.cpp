// The tied embedding's chunked gradient against the plain functions (see tied_embedding_check.h).
#include "tests/ch07_memory/zero/tied_embedding_check.h"

#include <algorithm>
#include <cmath>

#include "ch07_memory/zero/tied_embedding_gradient.h"
#include "common/autograd/functions.h"
#include "common/util/rng.h"

namespace lab::ch07::testing {
namespace {

constexpr int64_t kVocab = 100, kWidth = 8, kRows = 2, kSeq = 5;
constexpr int kRanks = 3;
constexpr int64_t kRowsPerRank = (kVocab + kRanks - 1) / kRanks;

Tensor random(const Shape& shape, uint64_t seed, Device device) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = rng.normal(0.0f, 1.0f);
  return Tensor::from_floats(v, shape, device);
}

double max_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_floats(), y = b.to_floats();
  double d = x.size() == y.size() ? 0 : INFINITY;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) d = std::max(d, std::fabs(double(x[i]) - double(y[i])));
  return d;
}

}  // namespace

TiedGradientErrors tied_gradient_errors(Device device, int64_t chunk_rows) {
  TiedGradientErrors errors;
  // The simulated ranks' reduction: each rank's rows of a chunk put where they belong in one whole gradient.
  Tensor reassembled = Tensor::zeros({kVocab, kWidth}, DType::F32, device);
  const TiedEmbeddingGradient tied(
      kVocab, kWidth, kRanks, kRowsPerRank, chunk_rows * kRanks * kWidth,
      [&](int64_t first_row, int64_t rows, const Tensor& pack) {
        ++errors.chunks;
        for (int r = 0; r < kRanks; ++r) {
          const int64_t begin = r * kRowsPerRank + first_row, end = std::min(begin + rows, kVocab);
          if (end > begin)
            reassembled.slice_rows(begin, end).copy_from(pack.slice_rows(r * rows, r * rows + (end - begin)));
        }
      });
  const Tensor wte = random({kVocab, kWidth}, 1, device), x = random({kRows, kSeq, kWidth}, 2, device);
  const Tensor dlogits = random({kRows, kSeq, kVocab}, 3, device), dout = random({kRows, kSeq, kWidth}, 4, device);
  std::vector<int32_t> ids(kRows * kSeq);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + 11) % kVocab);
  ids[1] = ids[7];  // a repeated token adds twice into one row
  const Tensor tokens = Tensor::from_ints(ids, {kRows, kSeq}, device);

  {  // The LM head.
    const Var chunked_x(x.clone()), chunked_wte(wte.clone()), plain_x(x.clone()), plain_wte(wte.clone());
    Tape chunked, plain;
    tied.lm_head(chunked, chunked_x, chunked_wte).bind_grad(dlogits.clone());
    ag::linear(plain, plain_x, plain_wte, Var()).bind_grad(dlogits.clone());
    chunked.backward();
    plain.backward();
    errors.head_wte = max_difference(reassembled, plain_wte.grad());
    errors.head_x = max_difference(chunked_x.grad(), plain_x.grad());
  }
  {  // The lookup.
    reassembled.zero_();
    const Tensor wpe = random({kSeq + 3, kWidth}, 5, device);
    const Var chunked_wte(wte.clone()), chunked_wpe(wpe.clone()), plain_wte(wte.clone()), plain_wpe(wpe.clone());
    Tape chunked, plain;
    tied.embedding(chunked, tokens, chunked_wte, chunked_wpe).bind_grad(dout.clone());
    ag::embedding(plain, tokens, plain_wte, plain_wpe).bind_grad(dout.clone());
    chunked.backward();
    plain.backward();
    errors.lookup_wte = max_difference(reassembled, plain_wte.grad());
    errors.lookup_wpe = max_difference(chunked_wpe.grad(), plain_wpe.grad());
  }
  return errors;
}

}  // namespace lab::ch07::testing
