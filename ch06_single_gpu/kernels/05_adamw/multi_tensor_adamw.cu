// multi_tensor_adamw (adamw_versions.h): the AdamW lab's v2, Apex's multi-tensor apply (apex/csrc/
// multi_tensor_apply.cuh) written out for AdamW.
//
// A per-tensor optimizer launches one kernel per tensor; GPT-2 has 148, most of them biases and LayerNorm
// gains of 768 elements: three blocks each, a GPU of 132 SMs almost idle for the length of a launch. Multi-
// tensor apply cuts every tensor into chunks of `chunk` elements and hands one chunk to each block of a launch.
// The launch's arguments carry a table (TensorTable): the addresses and sizes of up to kMaxTensors tensors, and
// for each of up to kMaxBlocks blocks the tensor and chunk it works on. The host walks the list filling the
// table and launches whenever it is full (no tensor slot left after a finished tensor, or no block slot left);
// a tensor cut by a launch continues in the next one, moved to slot 0.
//
// The sizes are Apex's for four lists (depth 4: p, g, m, v): 36 tensors, 320 blocks, chunks of 64K elements,
// so the table stays under the 4 KB a kernel's parameters may take. GPT-2 d12 needs ~7 launches: fewer than
// 148, but each of at most 320 blocks of 512 threads, while an H100 holds 132 x 4 such blocks at once, and
// the last chunk of each tensor is short. The flat-buffer kernel (flat_adamw.cu) needs neither the table nor
// the launches.
#include <cstdint>

#include "ch06_single_gpu/kernels/05_adamw/adamw_element.h"
#include "ch06_single_gpu/kernels/05_adamw/adamw_versions.h"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch06::adamw {

namespace {

using ops::cuda::LaunchScope;

constexpr int kMaxTensors = 36;
constexpr int kMaxBlocks = 320;
constexpr int kThreads = 512;

// The launch's work list, passed by value in the kernel's arguments.
struct TensorTable {
  float* params[kMaxTensors];
  const float* grads[kMaxTensors];
  float* m[kMaxTensors];
  float* v[kMaxTensors];
  int64_t sizes[kMaxTensors];
  float weight_decay[kMaxTensors];
  unsigned char block_to_tensor[kMaxBlocks];
  int block_to_chunk[kMaxBlocks];
};
static_assert(sizeof(TensorTable) + 2 * sizeof(int64_t) + sizeof(Constants) <= 4096,
              "a kernel's parameters must fit in 4 KB");

// ---------------------------------------------------------------- kernel

__global__ void multi_tensor_adamw_kernel(TensorTable table, int64_t chunk, Constants k) {
  const int t = table.block_to_tensor[blockIdx.x];
  const int64_t begin = static_cast<int64_t>(table.block_to_chunk[blockIdx.x]) * chunk;
  const int64_t end = begin + chunk < table.sizes[t] ? begin + chunk : table.sizes[t];
  float* params = table.params[t];
  const float* grads = table.grads[t];
  float* m = table.m[t];
  float* v = table.v[t];
  const float weight_decay = table.weight_decay[t];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    float mi = m[i], vi = v[i];
    params[i] = update(params[i], grads[i], mi, vi, k, weight_decay);
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

// ---------------------------------------------------------------- launcher

void multi_tensor_adamw(const std::vector<TensorSet>& tensors, const ops::AdamWHyper& hyper, float grad_scale,
                        int64_t chunk) {
  LAB_CHECK(chunk > 0, InvalidArgument, "multi_tensor_adamw: chunk must be positive, got ", chunk);
  if (tensors.empty()) return;
  LaunchScope scope(tensors.front().params);
  const Constants k = constants(hyper, grad_scale);
  TensorTable table{};
  int slots = 0, blocks = 0;
  const auto launch = [&] {
    LAB_LAUNCH(multi_tensor_adamw_kernel, {static_cast<unsigned int>(blocks), kThreads, 0, scope.stream()}, table,
               chunk, k);
    blocks = 0;
  };
  for (const TensorSet& t : tensors) {
    const int64_t size = t.params.numel();
    if (size == 0) continue;
    const int64_t chunks = (size + chunk - 1) / chunk;
    LAB_CHECK(chunks <= INT32_MAX, Unsupported, "multi_tensor_adamw: ", chunks, " chunks of one tensor");
    int slot = slots++;
    table.params[slot] = t.params.data<float>();
    table.grads[slot] = t.grads.data<float>();
    table.m[slot] = t.m.data<float>();
    table.v[slot] = t.v.data<float>();
    table.sizes[slot] = size;
    table.weight_decay[slot] = t.decay ? hyper.weight_decay : 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      table.block_to_tensor[blocks] = static_cast<unsigned char>(slot);
      table.block_to_chunk[blocks] = static_cast<int>(c);
      ++blocks;
      const bool tensor_done = c == chunks - 1;
      if (blocks < kMaxBlocks && !(tensor_done && slots == kMaxTensors)) continue;
      launch();
      if (tensor_done) {
        slots = 0;
      } else {  // the tensor goes on in the next launch, from slot 0
        table.params[0] = table.params[slot];
        table.grads[0] = table.grads[slot];
        table.m[0] = table.m[slot];
        table.v[0] = table.v[slot];
        table.sizes[0] = table.sizes[slot];
        table.weight_decay[0] = table.weight_decay[slot];
        slot = 0;
        slots = 1;
      }
    }
  }
  if (blocks > 0) launch();  // what the last tensors left in the table
}

}  // namespace lab::ch06::adamw
