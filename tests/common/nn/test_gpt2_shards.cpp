// GPT-2 shards on one process: the tensor-parallel cut of each parameter, the pipeline's split of the blocks,
// a shard's initialisation and weight loading (the whole model's values, sliced), and pipeline stages chained
// by hand computing the whole model's loss and gradients. Tensor parallelism's communication is tested under
// mpirun (tests/ch08_distributed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common/io/safetensors.h"
#include "common/nn/gpt2.h"
#include "common/nn/gpt2_weights.h"
#include "common/ops/grad_scale.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

GPT2Config small_config() {
  GPT2Config c;
  c.n_layer = 4;
  c.n_head = 4;
  c.n_embd = 32;
  c.block_size = 16;
  c.vocab_size = 200;
  c.padded_vocab_size = static_cast<int>(GPT2Config::pad_vocab(200));
  return c;
}

// Tensor-parallel functions for a shard whose test never runs it (initialisation, loading): every call fails.
struct NoCommunication final : TensorParallelFunctions {
  NoCommunication(int size, int rank) : size_(size), rank_(rank) {}
  int tp_size() const override { return size_; }
  int tp_rank() const override { return rank_; }
  Var copy_to_tp_ranks(Tape&, const Var&) const override { unused(); }
  Var reduce_from_tp_ranks(Tape&, const Var&, const Var&) const override { unused(); }
  Var vocab_parallel_embedding(Tape&, const Tensor&, const Var&, const Var&, int64_t) const override { unused(); }
  Tensor vocab_parallel_cross_entropy(Tape&, const Var&, const Tensor&, int64_t, int64_t,
                                      const ops::GradScale&) const override {
    unused();
  }
  [[noreturn]] static void unused() { fail(ErrorKind::Internal, "this test runs no tensor-parallel communication"); }
  int size_, rank_;
};

// A CPU tensor 0, 1, 2, ... of the given shape.
Tensor iota(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Tensor::from_floats(v, shape);
}

TEST(ModelShard, PipelineStagesSplitTheBlocksEvenly) {
  GPT2Config c = small_config();
  c.n_layer = 5;
  std::vector<std::pair<int, int>> ranges;
  for (int s = 0; s < 3; ++s) {
    const ModelShard shard = ModelShard::of_rank(c, 0, 1, s, 3);
    ranges.emplace_back(shard.first_block, shard.block_end(c));
    EXPECT_EQ(shard.has_embedding, s == 0);
    EXPECT_EQ(shard.has_head, s == 2);
  }
  EXPECT_EQ(ranges, (std::vector<std::pair<int, int>>{{0, 1}, {1, 3}, {3, 5}}));
  EXPECT_TRUE(ModelShard::of_rank(c, 0, 1, 0, 1).whole(c));
  EXPECT_FALSE(ModelShard::of_rank(c, 0, 2, 0, 1).whole(c));
}

TEST(ModelShard, RejectsLayoutsThatDoNotFit) {
  const GPT2Config c = small_config();
  testing::expect_error([&] { ModelShard::of_rank(c, 0, 3, 0, 1); }, ErrorKind::InvalidArgument,
                        {"4 attention heads do not divide among 3"});
  testing::expect_error([&] { ModelShard::of_rank(c, 0, 1, 0, 5); }, ErrorKind::InvalidArgument,
                        {"5 stages for 4 blocks"});
  testing::expect_error([&] { ModelShard::of_rank(c, 2, 2, 0, 1); }, ErrorKind::InvalidArgument,
                        {"tensor-parallel rank 2 of 2"});
  testing::expect_error([&] { GPT2(c, Device::cpu(), {}, ModelShard::of_rank(c, 0, 2, 0, 1)); },
                        ErrorKind::InvalidArgument, {"needs options.tensor_parallel"});
}

TEST(ModelShard, PaddedVocabularyDividesIntoSlicesOf128Rows) {
  GPT2Config c;  // GPT-2's 50257, padded to 50304
  EXPECT_EQ(c.padded_vocab_for(1), 50304);
  EXPECT_EQ(c.padded_vocab_for(2), 50432);
  EXPECT_EQ(c.padded_vocab_for(4), 50688);
  EXPECT_EQ(c.padded_vocab_for(3), 50304);  // already a multiple of 384
  for (int tp : {2, 3, 4, 8}) EXPECT_EQ(c.padded_vocab_for(tp) % (128 * tp), 0) << tp;
}

TEST(TensorParallelSplit, EachParameterIsCutAsMegatronCutsIt) {
  EXPECT_EQ(tp_split_of("wte.weight"), TpSplit::Rows);
  EXPECT_EQ(tp_split_of("wpe.weight"), TpSplit::Replicated);
  EXPECT_EQ(tp_split_of("h.3.attn.c_attn.weight"), TpSplit::QkvRows);
  EXPECT_EQ(tp_split_of("h.3.attn.c_attn.bias"), TpSplit::QkvRows);
  EXPECT_EQ(tp_split_of("h.3.attn.c_proj.weight"), TpSplit::Columns);
  EXPECT_EQ(tp_split_of("h.3.attn.c_proj.bias"), TpSplit::Replicated);
  EXPECT_EQ(tp_split_of("h.3.mlp.c_fc.weight"), TpSplit::Rows);
  EXPECT_EQ(tp_split_of("h.3.mlp.c_fc.bias"), TpSplit::Rows);
  EXPECT_EQ(tp_split_of("h.3.mlp.c_proj.weight"), TpSplit::Columns);
  EXPECT_EQ(tp_split_of("h.3.ln_2.weight"), TpSplit::Replicated);
  EXPECT_EQ(tp_split_of("ln_f.bias"), TpSplit::Replicated);
}

TEST(TensorParallelSplit, SlicesHoldTheRightElementsAndJoinBack) {
  // c_attn [3C, C] with C = 4, two ranks: rank 1 holds rows 2-3 of q, of k and of v.
  const Tensor qkv = iota({12, 4});
  const std::vector<float> part = tp_slice(qkv, TpSplit::QkvRows, 1, 2).to_floats();
  std::vector<float> expected;
  for (int row : {2, 3, 6, 7, 10, 11})
    for (int c = 0; c < 4; ++c) expected.push_back(static_cast<float>(row * 4 + c));
  EXPECT_EQ(part, expected);
  // c_proj [2, 6], three ranks: rank 2 holds columns 4-5 of each row.
  EXPECT_EQ(tp_slice(iota({2, 6}), TpSplit::Columns, 2, 3).to_floats(), (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ(tp_slice(iota({6}), TpSplit::Rows, 1, 3).to_floats(), (std::vector<float>{2, 3}));

  for (const auto& [split, shape] : std::vector<std::pair<TpSplit, Shape>>{{TpSplit::QkvRows, {24, 8}},
                                                                           {TpSplit::QkvRows, {24}},
                                                                           {TpSplit::Rows, {16, 8}},
                                                                           {TpSplit::Columns, {8, 16}}}) {
    const Tensor whole = iota(shape);
    for (int tp : {1, 2, 4}) {
      std::vector<float> parts;
      for (int r = 0; r < tp; ++r) {
        const Tensor p = tp_slice(whole, split, r, tp);
        EXPECT_EQ(p.shape(), tp_shard_shape(shape, split, tp));
        const std::vector<float> v = p.to_floats();
        parts.insert(parts.end(), v.begin(), v.end());
      }
      const Tensor joined = tp_join(Tensor::from_floats(parts, {shape_numel(shape)}), split, shape, tp);
      EXPECT_EQ(joined.to_floats(), whole.to_floats()) << shape_str(shape) << " over " << tp;
    }
  }
  testing::expect_error(
      [&] {
        tp_slice(iota({10, 4}), TpSplit::Rows, 0, 4);
      },
      ErrorKind::InvalidArgument, {"10 rows do not divide among 4"});
}

// The whole model's parameters as host vectors, by name.
std::map<std::string, std::vector<float>> values_of(const GPT2& model) {
  std::map<std::string, std::vector<float>> out;
  for (const ParamInfo& p : model.parameters().infos()) out[p.name] = model.parameters().value(p.name).to_floats();
  return out;
}

// A shard's slice of a whole-model tensor (wte padded to the shard's table first).
std::vector<float> expected_slice(const GPT2& shard, const GPT2Parameter& p, const std::vector<float>& whole_values,
                                  const Shape& whole_shape) {
  std::vector<float> padded(static_cast<size_t>(shape_numel(p.shape)), 0.0f);
  std::copy(whole_values.begin(), whole_values.begin() + std::min<int64_t>(shape_numel(whole_shape), padded.size()),
            padded.begin());
  return tp_slice(Tensor::from_floats(padded, p.shape), tp_split_of(p.name), shard.shard().tp_rank,
                  shard.shard().tp_size)
      .to_floats();
}

TEST(GPT2Shard, InitialisationIsTheWholeModelsSliced) {
  const GPT2Config c = small_config();
  GPT2 whole(c, Device::cpu());
  whole.init_weights(7);
  const auto reference = values_of(whole);
  int checked = 0;
  for (const auto& [tp, pp] : std::vector<std::pair<int, int>>{{1, 2}, {2, 1}, {2, 2}, {4, 4}}) {
    for (int t = 0; t < tp; ++t)
      for (int s = 0; s < pp; ++s) {
        ModelShard shard = ModelShard::of_rank(c, 0, 1, s, pp);
        shard.tp_rank = t;
        shard.tp_size = tp;
        ModelOptions options;
        if (tp > 1) options.tensor_parallel = std::make_shared<NoCommunication>(tp, t);
        GPT2 model(c, Device::cpu(), options, shard);
        model.init_weights(7);
        for (const GPT2Parameter& p : model.held_parameters()) {
          const Shape whole_shape = whole.parameters().info(p.name).shape;
          EXPECT_EQ(model.parameters().value(p.name).to_floats(),
                    expected_slice(model, p, reference.at(p.name), whole_shape))
              << p.name << " on tp " << t << "/" << tp << ", stage " << s << "/" << pp;
          ++checked;
        }
      }
  }
  EXPECT_GT(checked, 100);
}

TEST(GPT2Shard, LoadsItsSliceOfAWeightsFile) {
  const GPT2Config c = small_config();
  GPT2 whole(c, Device::cpu());
  whole.init_weights(11);
  const std::string path = ::testing::TempDir() + "gpt2_shards_weights.safetensors";
  save_gpt2_weights(whole, path);
  // The last pipeline stage of two (blocks 2-3, ln_f and the tied wte).
  GPT2 stage(c, Device::cpu(), {}, ModelShard::of_rank(c, 0, 1, 1, 2));
  load_gpt2_weights(stage, path);
  EXPECT_EQ(stage.parameters().infos().size(), 2 * 12 + 3u);
  for (const ParamInfo& p : stage.parameters().infos())
    EXPECT_EQ(stage.parameters().value(p.name).to_floats(), whole.parameters().value(p.name).to_floats()) << p.name;
  testing::expect_error([&] { save_gpt2_weights(stage, path); }, ErrorKind::InvalidArgument, {"the model is a shard"});
  std::filesystem::remove(path);
}

// Stages chained by hand on one process compute the whole model's loss, and their gradients are the whole
// model's (wte's summed over the two stages that hold it, as the embedding group does).
TEST(GPT2Shard, PipelineStagesComputeTheWholeModel) {
  const GPT2Config c = small_config();
  GPT2 whole(c, Device::cpu());
  whole.init_weights(5);
  Rng rng(6);
  const Tensor tokens = test::random_ids({2, 8}, rng, c.vocab_size);
  const Tensor targets = test::random_ids({2, 8}, rng, c.vocab_size);
  Tape whole_tape;
  const std::vector<float> whole_losses = whole.loss(whole_tape, tokens, targets).to_floats();
  whole_tape.backward();

  std::vector<std::unique_ptr<GPT2>> stages;
  for (int s = 0; s < 3; ++s) {
    stages.push_back(std::make_unique<GPT2>(c, Device::cpu(), ModelOptions{}, ModelShard::of_rank(c, 0, 1, s, 3)));
    stages.back()->init_weights(5);
  }
  std::vector<Tape> tapes(3);
  std::vector<Var> inputs(3), outputs(3);
  outputs[0] = stages[0]->forward_blocks(tapes[0], stages[0]->embed(tapes[0], tokens));
  for (int s = 1; s < 3; ++s) {
    inputs[s] = Var(outputs[s - 1].value().clone(), true);
    if (s < 2) outputs[s] = stages[s]->forward_blocks(tapes[s], inputs[s]);
  }
  const Tensor losses = stages[2]->head_loss(tapes[2], stages[2]->forward_blocks(tapes[2], inputs[2]), targets);
  EXPECT_EQ(losses.to_floats(), whole_losses);
  for (int s = 2; s >= 0; --s) {
    if (s < 2) outputs[s].bind_grad(inputs[s + 1].grad());
    tapes[s].backward();
  }
  for (const auto& stage : stages)
    for (const ParamInfo& p : stage->parameters().infos()) {
      std::vector<float> grad = stage->parameters().grad(p.name).to_floats();
      if (p.name == "wte.weight") {  // the other stage's part of the tied gradient
        const GPT2& other = stage.get() == stages[0].get() ? *stages[2] : *stages[0];
        const std::vector<float> o = other.parameters().grad(p.name).to_floats();
        for (size_t i = 0; i < grad.size(); ++i) grad[i] += o[i];
      }
      EXPECT_LT(test::max_scaled_error(grad, whole.parameters().grad(p.name).to_floats()), 1e-6) << p.name;
    }
  testing::expect_error([&] { stages[1]->embed(tapes[1], tokens); }, ErrorKind::InvalidArgument,
                        {"does not hold the embeddings"});
}

}  // namespace
}  // namespace lab
