// The PyTorch rows beside a staircase of gpt2_step_bench: the same step (same model, batch and sequence length) in
// PyTorch, run by tools/compare/pytorch_gpt2_step.py when the Python given can import torch, so that the book's
// staircase ends with the number users compare against. On a GPU: eager and torch.compile in bf16 (PyTorch's usual
// recipe, SDPA attention, fused AdamW); on a CPU: eager in fp32 (Debian's PyTorch has no compile).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/core/device.h"

namespace lab {

struct PyTorchRow {
  std::string name;                  // "pytorch eager bf16"
  bool ran = false;                  // false: `error` says why (no python3, no torch, the script failed)
  std::string error;                 // its one line
  double ms = 0;                     // median step
  double tokens_per_s = 0;           // at the median
  std::optional<double> peak_bytes;  // PyTorch's allocator peak (GPU only)
};

struct PyTorchWorkload {
  std::string model;
  Device device;
  int64_t batch = 0, seq = 0, steps = 0, warmup = 0, threads = 0;
  std::string python = "python3";  // the Python that has PyTorch
};

// Runs the script once per PyTorch configuration of the device (see above), each in its own process.
std::vector<PyTorchRow> run_pytorch_rows(const PyTorchWorkload& workload);

// The rows as a table beside `ours` ({rung name, tokens/s}: the rung each row is compared with), one line each.
std::string pytorch_table(const std::vector<PyTorchRow>& rows, const std::string& ours_name, double ours_tokens_per_s);

}  // namespace lab
