// gpt2_step_bench --staircase ch10 (ch10_gpt2/step_staircase.h): the book's rungs as data, the GPU-only ones (TF32,
// tuned flash kernels, CUDA graphs) left out on a CPU, one setting changed from each rung to the next; and chapter
// 9's staircase, whose CUDA graphs and tuned kernels rungs are GPU-only too.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ch09_advanced/step_staircase.h"
#include "ch10_gpt2/step_staircase.h"

namespace lab {
namespace {

std::vector<std::string> rung_names(const staircase::Staircase& stairs) {
  std::vector<std::string> names;
  for (const staircase::Rung& rung : stairs.rungs) names.push_back(rung.name);
  return names;
}

std::vector<std::string> changes(const staircase::Staircase& stairs) {
  std::vector<std::string> out;
  for (size_t i = 1; i < stairs.rungs.size(); ++i)
    out.push_back(staircase::describe_change(staircase::parse_settings(stairs.flags_for(stairs.rungs[i - 1])),
                                             staircase::parse_settings(stairs.flags_for(stairs.rungs[i]))));
  return out;
}

TEST(BookStaircase, EveryRungOfTheBookOneChangeAtATime) {
  const std::vector<std::string> base = {"--model", "tiny", "--seq", "8"};
  const staircase::Staircase cpu = ch10::book_staircase(base, 4, false), gpu = ch10::book_staircase(base, 4, true);
  EXPECT_EQ(rung_names(cpu),
            (std::vector<std::string>{"fp32", "bf16", "fused", "16-bit activations", "batched attention",
                                      "flash attention", "largest batch", "accumulation"}));
  EXPECT_EQ(rung_names(gpu), (std::vector<std::string>{"fp32", "tf32", "bf16", "fused", "16-bit activations",
                                                       "batched attention", "flash attention", "tuned flash kernels",
                                                       "cuda graphs", "largest batch", "accumulation"}));
  for (const staircase::Staircase* stairs : {&cpu, &gpu})
    EXPECT_TRUE(staircase::check_one_change_per_rung(*stairs).empty());
  EXPECT_EQ(changes(gpu),
            (std::vector<std::string>{"--dtype fp32 -> tf32", "--dtype tf32 -> bf16", "--kernels reference -> fused",
                                      "--activations fp32 -> 16bit", "--attention materialized -> batched",
                                      "--attention batched -> flash", "--attention flash -> flash-tuned",
                                      "+ --cuda-graphs true", "+ --batch-fits earlier-rungs", "+ --accumulate 4"}));
}

TEST(AttentionStaircase, TheCudaGraphsAndTunedKernelsRungsAreGpuRungs) {
  const std::vector<std::string> base = {"--model", "tiny", "--batch", "2"};
  const staircase::Staircase cpu = ch09::attention_staircase(base, false);
  EXPECT_EQ(rung_names(cpu), (std::vector<std::string>{"materialized", "batched", "flash", "flash, one pass"}));
  EXPECT_TRUE(staircase::check_one_change_per_rung(cpu).empty());
  EXPECT_EQ(changes(cpu).back(), "--attention flash -> flash-one-pass");
  const staircase::Staircase gpu = ch09::attention_staircase(base, true);
  EXPECT_EQ(rung_names(gpu), (std::vector<std::string>{"materialized", "batched", "flash", "cuda graphs",
                                                       "flash, tuned kernels", "flash, one pass"}));
  EXPECT_TRUE(staircase::check_one_change_per_rung(gpu).empty());
  const std::vector<std::string> gpu_changes = changes(gpu);
  EXPECT_EQ(gpu_changes[gpu_changes.size() - 3], "+ --cuda-graphs true");
  EXPECT_EQ(gpu_changes[gpu_changes.size() - 2], "--attention flash -> flash-tuned");
  EXPECT_EQ(gpu_changes.back(), "--attention flash-tuned -> flash-one-pass");
}

}  // namespace
}  // namespace lab
