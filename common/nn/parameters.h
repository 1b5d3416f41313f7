// All parameters of a model as views into one flat buffer, and all gradients as views into another.
//
// One contiguous buffer makes the whole-model operations single calls: zeroing gradients, the global
// gradient norm, the fused AdamW step, an all-reduce, a ZeRO shard, checkpoint I/O.
//
// Where each parameter sits in the buffer is the layout, chosen when the store is allocated:
//
//   Backward    the reverse of the declaration order. A model declares its parameters in the order its
//               forward pass uses them, so the buffer holds them in the order backward completes their
//               gradients: GPT-2's ln_f first, then the last block's parameters, ..., the first block's,
//               wpe, and wte last (it is tied to the LM head, whose gradient comes first, but its embedding
//               gradient comes at the very end). Data-parallel buckets then fill contiguously while backward
//               runs, and a layer's gradients sit together (PyTorch DDP and Megatron do the same).
//   DecayFirst  the parameters that get weight decay first, [0, decay_numel()), the rest after, each group in
//               declaration order: AdamW's decay is then one range. The layout of checkpoints' optimizer
//               state before it was stored per parameter (version 1), and of labs that want one decay range.
//
// Weight decay is per parameter either way: decay_ranges() lists the buffer's decayed ranges, which AdamW
// applies in one pass. Each parameter starts at a multiple of 32 elements (128 bytes) so vectorised kernels may
// assume aligned rows; the few padding elements stay zero forever.
#pragma once

#include <string>
#include <vector>

#include "common/autograd/var.h"
#include "common/ops/element_range.h"

namespace lab {

struct ParamInfo {
  std::string name;
  Shape shape;
  int64_t offset = 0;  // in elements, into the flat buffers
  bool decay = false;
  int64_t numel() const { return shape_numel(shape); }
};

enum class ParameterOrder { Backward, DecayFirst };

// `declared` (in declaration order) with each parameter's offset in the given layout; `total` receives the
// flat size, padding included. Pure arithmetic: ParameterStore::allocate uses it, and so does code that reads
// state written in another layout.
std::vector<ParamInfo> lay_out(std::vector<ParamInfo> declared, ParameterOrder order, int64_t& total);

class ParameterStore {
 public:
  // Declare every parameter, then allocate once.
  void declare(const std::string& name, const Shape& shape, bool decay);
  // Zero-filled params (MemCategory::Params) and grads (MemCategory::Grads), laid out in `order`.
  void allocate(Device device, ParameterOrder order = ParameterOrder::Backward);

  bool allocated() const { return allocated_; }
  // The parameter as a Var: its value and its bound gradient. Always the same Var for one name, so a gradient
  // hook set on it (var.h) is seen by every module that computes with it.
  const Var& var(const std::string& name) const;
  Tensor value(const std::string& name) const;
  Tensor grad(const std::string& name) const;
  const ParamInfo& info(const std::string& name) const;
  const std::vector<ParamInfo>& infos() const { return infos_; }  // in declaration order
  ParameterOrder order() const { return order_; }

  const Tensor& params() const { return params_; }  // the flat buffers
  const Tensor& grads() const { return grads_; }
  int64_t numel() const { return total_; }  // flat size, padding included
  // The decayed parameters' ranges of the flat buffer, in buffer order; neighbours (with only padding between
  // them) are merged.
  const std::vector<ElementRange>& decay_ranges() const { return decay_ranges_; }
  // DecayFirst layouts only: [0, decay_numel) get weight decay, nothing after it. InvalidArgument otherwise.
  int64_t decay_numel() const;
  int64_t num_parameters() const;  // real parameters, padding excluded
  Device device() const { return device_; }

  // Zeroes the flat gradient buffer or, once it is released, releases every parameter's own gradient.
  void zero_grad();
  // What a training step does instead of zero_grad: on CUDA, marks every gradient in the flat buffer stale
  // (Var::mark_grad_stale), so that each parameter's first contribution writes over it and the buffer is never
  // zero-filled whole: a GEMM with beta = 0 reads nothing of C there, and cuBLASLt's bias-gradient epilogue writes the
  // gradient itself. After the backward passes, zero_unwritten_grads zero-fills the gradients that nothing wrote (a
  // parameter no op used), before anything reads the flat buffer: its gradient norm, the optimizer, the data-parallel
  // all-reduce. On the CPU, and once the buffer is released, it is zero_grad: OpenBLAS's sgemm with beta = 0 clears C
  // in a pass of its own, and a d12 step at B = 1, T = 128 (2-vCPU VM, 2026-12-07) took 543-560 ms against 531-541
  // ms with the one memset of the whole buffer, its linear backwards 286-290 ms against 234-257.
  void start_new_gradients();
  void zero_unwritten_grads();
  // Releases the flat gradient buffer: from then on each parameter's gradient is allocated by the backward pass
  // that first adds to it (MemCategory::Grads) and released by whoever consumes it (Var::bind_grad with an
  // undefined tensor), so that gradients need not all be alive at once (chapter 7: optimizer in backward,
  // ZeRO-2). grads() is undefined afterwards.
  void release_flat_grads();
  // Releases the flat parameter buffer too, for ZeRO stage 3 (chapter 7), which keeps this rank's shard of it
  // and binds each parameter's value (Var::bind_value) only while it is used: every value is unbound now, and
  // params() is undefined afterwards. `restore_flat_params` takes a whole buffer back (a checkpoint's gather)
  // and binds every value to its views again.
  void release_flat_params();
  void restore_flat_params(Tensor flat);

 private:
  const ParamInfo* find(const std::string& name) const;

  std::vector<ParamInfo> infos_;
  std::vector<Var> vars_;  // parallel to infos_
  ParameterOrder order_ = ParameterOrder::Backward;
  int64_t total_ = 0;
  std::vector<ElementRange> decay_ranges_;
  Tensor params_, grads_;
  bool allocated_ = false;
  Device device_ = Device::cpu();
};

}  // namespace lab
