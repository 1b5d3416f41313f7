// gpt2_train under mpirun, on CPU ranks, against one process with the same global batch (label mpi): tensor
// parallelism (--tp 2), pipeline parallelism (--pp 2 --micro-batches 2 against one process accumulating 2)
// and data parallelism (--dp 2 --batch 2 against one process with --batch 4) log the same training and
// validation losses and sample the same text, and the ranks other than 0 print nothing. Checkpoints cross layouts: a
// run stopped at step 2 under one layout and resumed under another logs at steps 3 and 4 what the resuming layout's
// uninterrupted run logs (tp 2 -> one process, one process -> tp 2, pp 2 -> one process, tp 2 x pp 2 -> dp 2),
// and a --save under tp writes one checkpoint that holds the whole model. ZeRO stage 3 over dp 2 (chapter 7) logs
// the one process's losses and sample too (with --zero-prefetch), and its checkpoints resume in one process and
// the reverse. --memory-report under pp 2 prints rank 0's theory, its stage's. The chunked LM head under pp 2, dp 2
// and dp 2 x pp 2 logs the full head's losses.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "common/io/safetensors.h"
#include "common/nn/gpt2_weights.h"
#include "tests/ch10_gpt2/layout_launch.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::LaunchResult;
using testing::Layout;

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(TrainerLayouts, TensorParallelLogsTheLossesOfOneProcessAndSavesOneWholeCheckpoint) {
  const std::string dir = testing::scratch_directory();
  const std::string checkpoint = dir + "/tp_checkpoint";
  const LaunchResult tp =
      testing::expect_strategy_matches_one_process(dir, "cpu", testing::tensor_parallel(), "--save " + checkpoint);
  EXPECT_EQ(count_of(tp.out[0], "checkpoint: step 4 saved"), 1) << tp.out[0];

  // One directory, written once by rank 0, with the whole model's tensors at their whole shapes.
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(checkpoint)) files.insert(entry.path().filename());
  EXPECT_EQ(files,
            (std::set<std::string>{".lab-directory", "model.safetensors", "optimizer.safetensors", "state.json"}));
  const GPT2Config tiny = GPT2Config::from_name("tiny");
  EXPECT_EQ(read_gpt2_config(checkpoint + "/model.safetensors"), tiny);
  const SafetensorsReader weights(checkpoint + "/model.safetensors");
  EXPECT_EQ(weights.shape("wte.weight"), (Shape{tiny.vocab_size, tiny.n_embd}));
  EXPECT_EQ(weights.shape("h.0.attn.c_attn.weight"), (Shape{tiny.n_embd, 3 * tiny.n_embd}));
  const SafetensorsReader moments(checkpoint + "/optimizer.safetensors");
  EXPECT_EQ(moments.shape("m.h.0.mlp.c_proj.weight"), (Shape{tiny.n_embd, 4 * tiny.n_embd}));
}

TEST(TrainerLayouts, TheChunkedLmHeadUnderPipelineAndDataParallelismLogsTheFullHeadsLossesOfOneProcess) {
  // The chunked head writes wte's gradient in the forward pass: on the pipeline's last stage, where no embedding
  // follows, and under the data-parallel reducer, which reduces wte's bucket once its gradient is final.
  for (const testing::Strategy& strategy : {testing::pipeline_parallel(), testing::data_parallel()}) {
    SCOPED_TRACE(strategy.parallel.name);
    testing::expect_strategy_matches_one_process(testing::scratch_directory(), "cpu", strategy, "--lm-head chunked");
  }
}

// 4 ranks, dp 2 x pp 2: the last stage of each pipeline writes wte's gradient in its forward pass, and the dp
// reducer of that stage averages it with the other pipeline's (1 row per rank, 2 micro-batches a step).
TEST(TrainerLayouts, TheChunkedLmHeadOnFourRanksLogsTheFullHeadsLossesOfOneProcess) {
  const testing::Strategy dp2_pp2{{"dp2_pp2", 4, "--batch 1 --dp 2 --pp 2 --micro-batches 2"},
                                  {"one_process", 1, "--batch 2 --total-batch-tokens 64"}};
  testing::expect_strategy_matches_one_process(testing::scratch_directory(), "cpu", dp2_pp2, "--lm-head chunked");
}

TEST(TrainerLayouts, PipelineParallelLogsTheLossesOfOneProcessAccumulating) {
  const std::string dir = testing::scratch_directory();
  const LaunchResult pp = testing::expect_strategy_matches_one_process(dir, "cpu", testing::pipeline_parallel());
  // Each step's record carries the measured bubble next to the ideal (P-1)/(M+P-1) = 1/3.
  int steps = 0;
  for (const Json& r : testing::read_log(pp.log))
    if (r.contains("loss")) {
      ++steps;
      EXPECT_DOUBLE_EQ(r.at("bubble_ideal").as_number(), 1.0 / 3.0);
      EXPECT_GE(r.at("bubble").as_number(), 0.0);
      EXPECT_LT(r.at("bubble").as_number(), 1.0);
    }
  EXPECT_EQ(steps, 4);
}

TEST(TrainerLayouts, DataParallelLogsTheLossesOfOneProcessWithTheWholeBatch) {
  const std::string dir = testing::scratch_directory();
  testing::expect_strategy_matches_one_process(dir, "cpu", testing::data_parallel());
}

TEST(TrainerLayouts, ZeroStage3WithPrefetchLogsTheLossesOfOneProcessWithTheWholeBatch) {
  const std::string dir = testing::scratch_directory();
  testing::expect_strategy_matches_one_process(
      dir, "cpu", {{"zero3", 2, "--batch 2 --dp 2 --zero 3 --zero-prefetch"}, {"one_process", 1, "--batch 4"}});
}

// --memory-report under a pipeline prints the theory of the rank that prints: rank 0, tp rank 0 of 1 and stage 0
// of 2, which holds the embeddings and, under 1F1B, 2 of the 4 micro-batches at once; its parameters, gradients and
// optimizer state are what the allocator counts (peak/theory 1.000).
TEST(TrainerLayouts, MemoryReportIsTheTheoryOfTheRankThatPrints) {
  const std::string dir = testing::scratch_directory();
  const LaunchResult r = testing::run_layout(dir, "pp2_memory", "cpu", {"pp2", 2, "--batch 2 --pp 2 --micro-batches 4"},
                                             1, "--memory-report");
  const std::string& out = r.out[0];
  EXPECT_NE(out.find("memory of step 1 on cpu (theory: its shard on tp rank 0 of 1 and stage 0 of 2, 2 of 4 "
                     "micro-batches in flight (1f1b), every rung's share):"),
            std::string::npos)
      << out;
  for (const std::string category : {"params", "grads", "optimizer"}) {
    const size_t at = out.find("\n" + category + " ");
    ASSERT_NE(at, std::string::npos) << category << " missing from the report:\n" << out;
    const std::string line = out.substr(at + 1, out.find('\n', at + 1) - at - 1);
    EXPECT_EQ(line.substr(line.size() - 5), "1.000") << line;
  }
}

// `from` trains 2 of 4 steps and saves; `to` resumes the checkpoint and trains steps 3 and 4, which log the
// losses of `to`'s uninterrupted run (and its validation loss at step 4).
void expect_resume_across(const Layout& from, const Layout& to) {
  const std::string dir = testing::scratch_directory();
  const std::string checkpoint = dir + "/checkpoint";
  testing::run_layout(dir, "saved", "cpu", from, 2, "--save " + checkpoint);
  const LaunchResult resumed = testing::run_layout(dir, "resumed", "cpu", to, 4, "--resume " + checkpoint);
  const LaunchResult uninterrupted = testing::run_layout(dir, "uninterrupted", "cpu", to, 4);
  testing::expect_same_losses(uninterrupted, resumed, {3, 4}, from.name + " -> " + to.name);
}

const Layout kOneProcess{"one_process", 1, "--batch 2"};
const Layout kTensorParallel{"tp2", 2, "--batch 2 --tp 2"};

TEST(CheckpointsAcrossLayouts, TensorParallelResumesInOneProcess) {
  expect_resume_across(kTensorParallel, kOneProcess);
}

TEST(CheckpointsAcrossLayouts, OneProcessResumesUnderTensorParallelism) {
  expect_resume_across(kOneProcess, kTensorParallel);
}

TEST(CheckpointsAcrossLayouts, PipelineResumesInOneProcessAccumulating) {
  expect_resume_across({"pp2", 2, "--batch 2 --pp 2 --micro-batches 2"},
                       {"one_process", 1, "--batch 2 --total-batch-tokens 64"});
}

TEST(CheckpointsAcrossLayouts, ZeroStage3ResumesInOneProcessAndTheReverse) {
  const Layout zero3{"zero3", 2, "--batch 2 --dp 2 --zero 3"}, one{"one_process", 1, "--batch 4"};
  expect_resume_across(zero3, one);
  expect_resume_across(one, zero3);
}

// 4 ranks: tp 2 x pp 2 (a step of 2 micro-batches of 2 rows), resumed by dp 2 (1 row per rank, 2 micro-batches
// accumulated).
TEST(CheckpointsAcrossLayouts, TensorAndPipelineParallelResumesUnderDataParallelism) {
  expect_resume_across({"tp2_pp2", 4, "--batch 2 --tp 2 --pp 2 --micro-batches 2"},
                       {"dp2", 2, "--batch 1 --dp 2 --total-batch-tokens 64"});
}

// A step is a number of tokens whatever the layout: resuming a pipeline's step of 2 micro-batches with one
// micro-batch per step is refused before anything is trained.
TEST(CheckpointsAcrossLayouts, AStepOfOtherTokensIsRefused) {
  const std::string dir = testing::scratch_directory();
  const std::string checkpoint = dir + "/checkpoint";
  testing::run_layout(dir, "saved", "cpu", {"pp2", 2, "--batch 2 --pp 2 --micro-batches 2"}, 2, "--save " + checkpoint);
  const LaunchResult refused = testing::launch_trainer(
      dir, "refused", 1, testing::layout_run_flags(dir, "cpu") + " --batch 2 --steps 4 --resume " + checkpoint);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err[0].find("--resume: a step was 64 tokens"), std::string::npos) << refused.err[0];
  EXPECT_TRUE(testing::logged_losses(refused.log).empty());
}

}  // namespace
}  // namespace lab
