// ch06_adamw_lab: one AdamW step over a GPT-2's flat parameter buffer, the versions side by side (see
// adamw_lab.h), each validated against the CPU reference and then timed.
//
//   ch06_adamw_lab                                    GPT-2 d12's 148 tensors (124M parameters), fp32
//   ch06_adamw_lab --table bf16 --grad-dtype bf16     bf16 parameters and gradients, fp32 master weights
//   ch06_adamw_lab --model small --repeats 50         the 4-layer model of the CPU quick start
#include <cstdio>
#include <memory>
#include <string>

#include "ch06_single_gpu/kernels/05_adamw/adamw_lab.h"
#include "common/core/device.h"
#include "common/lab/lab_main.h"
#include "common/nn/gpt2.h"
#include "common/util/flags.h"
#include "common/util/main.h"

namespace {

int run(int argc, char** argv) {
  lab::ch06::AdamWProblem problem;
  std::string model = "d12", table = "fp32", grad_dtype = "f32";
  double lr = problem.hyper.lr, weight_decay = problem.hyper.weight_decay, grad_scale = problem.grad_scale;
  int64_t step = problem.hyper.step, seed = static_cast<int64_t>(problem.seed);
  lab::Flags flags("ch06_adamw_lab", "One AdamW step over GPT-2's parameters: the versions side by side");
  flags.add_choice("model", &model, lab::GPT2Config::names(), "whose parameter layout to update");
  flags.add_choice("table", &table, {"fp32", "bf16"}, "fp32 parameters, or bf16 ones with fp32 master weights");
  flags.add_choice("grad-dtype", &grad_dtype, {"f32", "bf16"}, "the gradients' dtype (bf16 table only)");
  flags.add_float("lr", &lr, "learning rate", 0.0, 1.0);
  flags.add_float("weight-decay", &weight_decay, "weight decay of the 2-D weights", 0.0, 1.0);
  flags.add_float("grad-scale", &grad_scale, "factor on the gradients (a clipping coefficient)", 0.0, 1e4);
  flags.add_int("step", &step, "the step number t of the bias corrections", 1);
  flags.add_int("seed", &seed, "seed of the random state and of the stochastic rounding", 0);
  lab::kernel_lab::LabCommandLine lab_flags;
  lab_flags.register_flags(flags);
  if (!lab_flags.parse(flags, argc, argv)) return 0;
  lab_flags.quick_size(flags, "model", model, std::string("small"));
  problem.table = table == "fp32" ? lab::ch06::AdamWTable::FP32 : lab::ch06::AdamWTable::BF16;
  problem.grad_dtype = lab::parse_dtype(grad_dtype);
  LAB_CHECK(problem.table == lab::ch06::AdamWTable::BF16 || problem.grad_dtype == lab::DType::F32, InvalidArgument,
            "--grad-dtype bf16 needs --table bf16");
  problem.hyper.lr = static_cast<float>(lr);
  problem.hyper.weight_decay = static_cast<float>(weight_decay);
  problem.hyper.step = step;
  problem.grad_scale = static_cast<float>(grad_scale);
  problem.seed = static_cast<uint64_t>(seed);
  if (!lab::cuda_available()) std::printf("no CUDA device visible: only the CPU versions run\n");
  // The model is built only for its parameter layout, and freed before the lab allocates its own buffers.
  auto gpt2 = std::make_unique<lab::GPT2>(lab::GPT2Config::from_name(model), lab::Device::cpu());
  const lab::kernel_lab::KernelLab lab = lab::ch06::make_adamw_lab(problem, gpt2->parameters());
  gpt2.reset();
  return lab::kernel_lab::run_lab(lab, lab_flags);
}

}  // namespace

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, run);
}
