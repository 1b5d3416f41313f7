// Tensor: a shape, a dtype, a device and a ref-counted Storage. Contiguous row-major only.
//
// Views share storage: reshape() keeps the elements and changes the shape; slice_rows() and view()
// take a contiguous range. That is all the indexing there is: this is not a general array library.
// Parameters of a model are views into one flat buffer (see common/nn/parameters.h).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/core/device.h"
#include "common/core/dtype.h"
#include "common/core/error.h"
#include "common/core/memory.h"

namespace lab {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[4, 64, 768]"

// A block of memory on one device. Owns it through the device allocator, or wraps memory owned by
// someone else (a mapped file, a pinned buffer) with a release callback.
class Storage {
 public:
  Storage(size_t bytes, Device device, MemCategory category);
  Storage(void* data, size_t bytes, Device device, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  MemCategory category() const { return category_; }

  // Activation recompute (ag::recompute_in_backward): release() gives the memory back to the allocator while the
  // Storage, and every tensor that views it, stays; restore() takes a new block of the same size, uninitialised,
  // for the value to be computed into again. Reading a released storage's tensor is an error (Tensor::raw).
  // Owned memory only.
  void release();
  void restore();
  bool released() const { return released_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  MemCategory category_ = MemCategory::Other;
  bool released_ = false;
  std::function<void()> release_;  // set for wrapped memory only
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  // Uninitialised memory, tagged with the thread's current MemCategory.
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu());
  // Host data copied into a new tensor on `device`.
  static Tensor from_floats(std::span<const float> values, const Shape& shape, Device device = Device::cpu());
  static Tensor from_ints(std::span<const int32_t> values, const Shape& shape, Device device = Device::cpu());
  // Wraps existing memory without copying; `release` runs when the last view is gone.
  static Tensor wrap(void* data, const Shape& shape, DType dtype, Device device, std::function<void()> release);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  void* raw() const;
  template <typename T>
  T* data() const {
    check_dtype(DTypeOf<T>::value, "data<T>()");
    return static_cast<T*>(raw());
  }

  // ---- views (share storage)
  Tensor reshape(const Shape& shape) const;                     // same numel; one dim may be -1
  Tensor slice_rows(int64_t begin, int64_t end) const;          // [begin, end) along dim 0
  Tensor view(int64_t offset_elems, const Shape& shape) const;  // contiguous range of the flat elements
  Tensor flatten() const { return reshape({numel_}); }

  // ---- copies and fills
  Tensor to(Device device) const;  // a copy on `device` (a copy even when already there)
  Tensor clone() const { return to(device()); }
  Tensor to_dtype(DType dtype) const;       // f32 <-> bf16/f16 conversion, CPU only
  void copy_from(const Tensor& src) const;  // same element count and dtype, any devices (data, not handle)
  void zero_() const;
  void fill_(float value) const;         // f32 tensors
  std::vector<float> to_floats() const;  // f32/bf16/f16 on any device -> host floats
  std::vector<int32_t> to_ints() const;  // i32/u16 on any device -> host ints
  float item() const;                    // a one-element float tensor's value

  // ---- checks with clear messages: `what` names the tensor in the error
  void check_dtype(DType expected, const char* what) const;
  void check_shape(const Shape& expected, const char* what) const;
  void check_ndim(int expected, const char* what) const;
  void check_device(Device expected, const char* what) const;
  void check_defined(const char* what) const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
};

// Copies `bytes` between any two devices (host<->device copies are synchronous on the current stream).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Sets `bytes` bytes at `dst` to zero.
void zero_bytes(void* dst, Device device, size_t bytes);

}  // namespace lab
