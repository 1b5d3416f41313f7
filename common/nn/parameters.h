// All parameters of a model as views into one flat buffer, and all gradients as views into another.
//
// One contiguous buffer makes the whole-model operations single calls: zeroing gradients, the global
// gradient norm, the fused AdamW step, an all-reduce, a ZeRO shard, checkpoint I/O.
// Parameters that get weight decay (the 2-D weights) are laid out first, [0, decay_numel()), the rest
// after, so AdamW needs just two calls. Each parameter starts at a multiple of 32 elements (128 bytes)
// so vectorised kernels may assume aligned rows; the few padding elements stay zero forever.
#pragma once

#include <string>
#include <vector>

#include "common/autograd/var.h"

namespace lab {

struct ParamInfo {
  std::string name;
  Shape shape;
  int64_t offset = 0;  // in elements, into the flat buffers
  bool decay = false;
  int64_t numel() const { return shape_numel(shape); }
};

class ParameterStore {
 public:
  // Declare every parameter, then allocate once.
  void declare(const std::string& name, const Shape& shape, bool decay);
  void allocate(Device device);  // zero-filled params (MemCategory::Params) and grads (MemCategory::Grads)

  bool allocated() const { return params_.defined(); }
  Var var(const std::string& name) const;  // value + bound gradient
  Tensor value(const std::string& name) const;
  Tensor grad(const std::string& name) const;
  const ParamInfo& info(const std::string& name) const;
  const std::vector<ParamInfo>& infos() const { return infos_; }  // in buffer order

  const Tensor& params() const { return params_; }  // the flat buffers
  const Tensor& grads() const { return grads_; }
  int64_t numel() const { return total_; }            // flat size, padding included
  int64_t decay_numel() const { return decay_end_; }  // [0, decay_numel) get weight decay
  int64_t num_parameters() const;                     // real parameters, padding excluded
  Device device() const { return params_.device(); }

  void zero_grad() { grads_.zero_(); }

 private:
  const ParamInfo* find(const std::string& name) const;

  std::vector<ParamInfo> infos_;
  int64_t total_ = 0;
  int64_t decay_end_ = 0;
  Tensor params_, grads_;
};

}  // namespace lab
