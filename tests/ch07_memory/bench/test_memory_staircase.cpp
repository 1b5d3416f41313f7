// The one-process memory staircase at a tiny size (seq 16, one timed step per rung): one change per rung, every
// rung runs, and the optimizer in backward, on top of block recompute over the whole batch, holds about the tied
// token embedding's gradient at its peak instead of the whole gradient buffer of the rung below it; flash attention
// on top of it changes nothing but the activations.
#include <gtest/gtest.h>

#include <cstdio>

#include "ch07_memory/memory_staircase.h"
#include "ch10_gpt2/run_settings.h"

namespace lab::ch07 {
namespace {

MemoryBenchConfig tiny_config() {
  MemoryBenchConfig c;
  c.model = "tiny";
  c.batch = 4;
  c.seq = 16;
  c.micro_batches = 2;
  c.steps = 1;
  return c;
}

double median_of(const staircase::RungReport& r, const std::string& metric) {
  const staircase::MetricReport* m = r.find(metric);
  EXPECT_NE(m, nullptr) << r.rung.name << " has no " << metric;
  return m ? m->summary.median : 0.0;
}

TEST(MemoryStaircase, OptimizerInBackwardSitsOnBlockRecomputeOverTheWholeBatch) {
  const staircase::Staircase stairs = memory_staircase(tiny_config());
  EXPECT_TRUE(staircase::check_one_change_per_rung(stairs).empty());
  std::vector<std::string> names;
  for (const staircase::Rung& r : stairs.rungs) names.push_back(r.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"original", "accumulation", "selective", "selective-ln", "block",
                                      "block-one-pass", "optimizer-in-backward", "flash-attention", "chunked-head"}));
  const staircase::Settings top = staircase::parse_settings(stairs.flags_for(stairs.rungs[6]));
  EXPECT_EQ(top.at("optimizer-in-backward"), "true");
  EXPECT_EQ(top.at("recompute"), "block");
  EXPECT_EQ(top.at("batch"), "4");      // one pass: the optimizer in backward cannot accumulate
  EXPECT_EQ(top.at("grad-clip"), "0");  // nor clip
  const staircase::Settings flash = staircase::parse_settings(stairs.flags_for(stairs.rungs[7]));
  EXPECT_EQ(flash.at("attention"), "flash");
  EXPECT_EQ(flash.at("optimizer-in-backward"), "true");
  const staircase::Settings head = staircase::parse_settings(stairs.flags_for(stairs.rungs.back()));
  EXPECT_EQ(head.at("lm-head"), "chunked");
  EXPECT_EQ(head.at("attention"), "flash");
}

TEST(MemoryStaircase, OptimizerInBackwardKeepsAboutTheTiedEmbeddingsGradient) {
  const MemoryBenchConfig config = tiny_config();
  const staircase::Staircase stairs = memory_staircase(config);
  const staircase::StaircaseReport report = staircase::run_staircase(stairs, [&](const staircase::Rung& rung) {
    return measure_training_rung(staircase::parse_settings(stairs.flags_for(rung)), config.device, config.steps);
  });
  for (const staircase::RungReport& r : report.rungs) ASSERT_TRUE(r.ran) << r.rung.name << ": " << r.error;
  const staircase::RungReport& block = report.rungs[4];
  const staircase::RungReport& one_pass = report.rungs[5];
  const staircase::RungReport& in_backward = report.rungs[6];

  // Below it, the whole flat gradient buffer: as many bytes as the parameters.
  const double params = median_of(block, "params_MiB");
  EXPECT_NEAR(median_of(block, "grads_MiB"), params, 0.01 * params);
  EXPECT_NEAR(median_of(one_pass, "grads_MiB"), params, 0.01 * params);
  // The tied embedding's gradient [padded vocabulary, C] lives through the whole backward; little else beside it.
  const GPT2Config tiny = GPT2Config::from_name("tiny");
  const double wte = static_cast<double>(tiny.padded_vocab_for(1) * tiny.n_embd * 4) / (1024.0 * 1024.0);
  const double grads = median_of(in_backward, "grads_MiB");
  EXPECT_GE(grads, wte);
  EXPECT_LT(grads - wte, 0.5 * (params - wte));  // the other gradients were freed as they went
  EXPECT_LT(grads, median_of(one_pass, "grads_MiB"));
  EXPECT_LT(grads, median_of(block, "grads_MiB"));
  std::printf("grads peak: block %.3f MiB, optimizer in backward %.3f MiB (wte's gradient %.3f MiB)\n",
              median_of(block, "grads_MiB"), grads, wte);
  // The rest of the step is unchanged: the same parameters and moments.
  EXPECT_EQ(median_of(in_backward, "params_MiB"), params);
  EXPECT_EQ(median_of(in_backward, "optimizer_MiB"), median_of(one_pass, "optimizer_MiB"));
  // Flash attention on top changes the activations only, and can only lower them (no probabilities kept; here the
  // logits, not the block re-run in backward, set the peak, so it need not move).
  const staircase::RungReport& flash = report.rungs[7];
  for (const char* metric : {"params_MiB", "grads_MiB", "optimizer_MiB"})
    EXPECT_EQ(median_of(flash, metric), median_of(in_backward, metric)) << metric;
  EXPECT_LE(median_of(flash, "activations_MiB"), median_of(in_backward, "activations_MiB"));
  // Recomputing the LayerNorms' outputs too keeps less than selective recompute alone, and changes nothing else.
  const staircase::RungReport& selective = report.rungs[2];
  const staircase::RungReport& selective_ln = report.rungs[3];
  EXPECT_LT(median_of(selective_ln, "activations_MiB"), median_of(selective, "activations_MiB"));
  for (const char* metric : {"params_MiB", "grads_MiB", "optimizer_MiB"})
    EXPECT_EQ(median_of(selective_ln, metric), median_of(selective, metric)) << metric;
}

}  // namespace
}  // namespace lab::ch07
