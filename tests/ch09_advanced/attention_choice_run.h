// What the tests of chapter 9's --attention rung share: one attention function run forward and backward on
// given inputs, and a tiny GPT-2 trained some steps with a chosen attention.
#pragma once

#include <cstdint>
#include <vector>

#include "ch09_advanced/attention_choice.h"
#include "common/autograd/tape.h"
#include "common/core/tensor.h"

namespace lab::test {

struct AttentionRun {
  std::vector<float> out, dqkv;
};

// attention(qkv) with the output's gradient seeded to `dout`; qkv and dout are copied to `device`.
AttentionRun run_attention_function(const ModelOptions::AttentionFn& attention, const Tensor& qkv, const Tensor& dout,
                                    int n_head, Device device);

struct TrainingRun {
  std::vector<double> losses;   // one per step
  int64_t activation_peak = 0;  // of the first step, above the activations live before it
};

// A tiny GPT-2 (4 heads of 16, block 160: sequences of 130 tokens cross two of flash attention's 64-row tiles)
// trained `steps` steps of AdamW on one fixed random batch, with `attention` in `storage`, on `device` in
// `matmul` precision (the model's 16-bit products for bf16, as the trainer's).
TrainingRun train_tiny_gpt2(ch09::Attention attention, DType matmul, Device device, int steps);

}  // namespace lab::test
