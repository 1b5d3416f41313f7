#include "common/core/tensor.h"

#include <cstring>

#include "common/core/gpu_backend.h"
#include "common/core/parallel.h"
#include "common/core/step_profile.h"

namespace lab {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    LAB_CHECK(d >= 0, InvalidArgument, "negative dimension in shape ", shape_str(shape));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---------------------------------------------------------------- Storage

Storage::Storage(size_t bytes, Device device, MemCategory category)
    : bytes_(bytes), device_(device), category_(category) {
  if (bytes_ > 0) data_ = allocator_for(device_).allocate(bytes_, category_);
}

Storage::Storage(void* data, size_t bytes, Device device, std::function<void()> release)
    : data_(data), bytes_(bytes), device_(device), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) {
    release_();
  } else if (data_) {
    allocator_for(device_).deallocate(data_, bytes_, category_);
  }
}

void Storage::release() {
  LAB_CHECK(!release_, Internal, "only owned memory can be released for recompute");
  if (released_) return;
  if (data_) allocator_for(device_).deallocate(data_, bytes_, category_);
  data_ = nullptr;
  released_ = true;
}

void Storage::restore() {
  if (!released_) return;
  if (bytes_ > 0) data_ = allocator_for(device_).allocate(bytes_, category_);
  released_ = false;
}

// ---------------------------------------------------------------- byte movers

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  require_gpu_backend("copy to or from a CUDA tensor").copy(dst, dst_device, src, src_device, bytes);
}

void zero_bytes(void* dst, Device device, size_t bytes) {
  if (bytes == 0) return;
  if (StepProfile* profile = StepProfile::open_profile()) profile->add_zero_fill(static_cast<int64_t>(bytes));
  if (device.is_cpu()) {
    parallel_memset_zero(dst, bytes);
    return;
  }
  require_gpu_backend("zeroing a CUDA tensor").memset_zero(dst, device, bytes);
}

// ---------------------------------------------------------------- Tensor: creation

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.shape_ = shape;
  t.numel_ = shape_numel(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(t.nbytes(), device, current_mem_category());
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::from_floats(std::span<const float> values, const Shape& shape, Device device) {
  LAB_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), InvalidArgument, "from_floats: ", values.size(),
            " values for shape ", shape_str(shape));
  Tensor t = empty(shape, DType::F32, device);
  copy_bytes(t.raw(), device, values.data(), Device::cpu(), t.nbytes());
  return t;
}

Tensor Tensor::from_ints(std::span<const int32_t> values, const Shape& shape, Device device) {
  LAB_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), InvalidArgument, "from_ints: ", values.size(),
            " values for shape ", shape_str(shape));
  Tensor t = empty(shape, DType::I32, device);
  copy_bytes(t.raw(), device, values.data(), Device::cpu(), t.nbytes());
  return t;
}

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, Device device, std::function<void()> release) {
  Tensor t;
  t.shape_ = shape;
  t.numel_ = shape_numel(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(data, t.nbytes(), device, std::move(release));
  return t;
}

// ---------------------------------------------------------------- Tensor: access and views

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  const int j = i < 0 ? i + n : i;
  LAB_CHECK(j >= 0 && j < n, InvalidArgument, "dim(", i, ") of a tensor with shape ", shape_str(shape_));
  return shape_[j];
}

void* Tensor::raw() const {
  check_defined("tensor");
  LAB_CHECK(!storage_->released(), Internal,
            "a tensor whose memory is released until backward recomputes it was read before the recompute");
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

Tensor Tensor::reshape(const Shape& shape) const {
  check_defined("reshape");
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      LAB_CHECK(infer < 0, InvalidArgument, "reshape: more than one -1 in ", shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    LAB_CHECK(known > 0 && numel_ % known == 0, InvalidArgument, "reshape ", shape_str(shape_), " to ",
              shape_str(shape));
    s[infer] = numel_ / known;
  }
  LAB_CHECK(shape_numel(s) == numel_, InvalidArgument, "reshape ", shape_str(shape_), " (", numel_, " elements) to ",
            shape_str(shape));
  Tensor t = *this;
  t.shape_ = s;
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  check_defined("slice_rows");
  LAB_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], InvalidArgument, "slice_rows(", begin, ", ",
            end, ") of shape ", shape_str(shape_));
  const int64_t row = shape_[0] ? numel_ / shape_[0] : 0;
  Shape s = shape_;
  s[0] = end - begin;
  return view(begin * row, s);
}

Tensor Tensor::view(int64_t offset_elems, const Shape& shape) const {
  check_defined("view");
  const int64_t n = shape_numel(shape);
  LAB_CHECK(offset_elems >= 0 && offset_elems + n <= numel_, InvalidArgument, "view of ", n, " elements at offset ",
            offset_elems, " of a tensor with ", numel_);
  Tensor t = *this;
  t.offset_bytes_ = offset_bytes_ + static_cast<size_t>(offset_elems) * dtype_size(dtype_);
  t.shape_ = shape;
  t.numel_ = n;
  return t;
}

// ---------------------------------------------------------------- Tensor: copies and fills

Tensor Tensor::to(Device device) const {
  check_defined("to");
  MemoryScope scope(storage_->category());
  Tensor t = empty(shape_, dtype_, device);
  copy_bytes(t.raw(), device, raw(), this->device(), nbytes());
  return t;
}

Tensor Tensor::to_dtype(DType dtype) const {
  check_defined("to_dtype");
  LAB_CHECK(is_cpu(), Unsupported, "to_dtype is a host conversion; move the tensor to the CPU first");
  if (dtype == dtype_) return clone();
  const std::vector<float> values = to_floats();
  MemoryScope scope(storage_->category());
  Tensor t = empty(shape_, dtype, Device::cpu());
  switch (dtype) {
    case DType::F32: std::memcpy(t.raw(), values.data(), t.nbytes()); break;
    case DType::BF16: {
      auto* out = static_cast<uint16_t*>(t.raw());
      for (int64_t i = 0; i < numel_; ++i) out[i] = float_to_bf16_bits(values[i]);
      break;
    }
    case DType::F16: {
      auto* out = static_cast<uint16_t*>(t.raw());
      for (int64_t i = 0; i < numel_; ++i) out[i] = float_to_f16_bits(values[i]);
      break;
    }
    default: fail(ErrorKind::Unsupported, "to_dtype: ", dtype_name(dtype_), " -> ", dtype_name(dtype));
  }
  return t;
}

void Tensor::copy_from(const Tensor& src) const {
  check_defined("copy_from destination");
  src.check_defined("copy_from source");
  LAB_CHECK(src.dtype_ == dtype_ && src.numel_ == numel_, InvalidArgument, "copy_from: ", dtype_name(src.dtype_),
            shape_str(src.shape_), " into ", dtype_name(dtype_), shape_str(shape_));
  copy_bytes(raw(), device(), src.raw(), src.device(), nbytes());
}

void Tensor::zero_() const {
  zero_bytes(raw(), device(), nbytes());
}

void Tensor::fill_(float value) const {
  check_dtype(DType::F32, "fill_");
  if (is_cpu()) {
    float* p = data<float>();
    for (int64_t i = 0; i < numel_; ++i) p[i] = value;
    return;
  }
  std::vector<float> host(static_cast<size_t>(numel_), value);
  copy_bytes(raw(), device(), host.data(), Device::cpu(), nbytes());
}

std::vector<float> Tensor::to_floats() const {
  check_defined("to_floats");
  std::vector<float> out(static_cast<size_t>(numel_));
  if (dtype_ == DType::F32) {
    copy_bytes(out.data(), Device::cpu(), raw(), device(), nbytes());
    return out;
  }
  LAB_CHECK(dtype_ == DType::BF16 || dtype_ == DType::F16, InvalidArgument, "to_floats of a ", dtype_name(dtype_),
            " tensor");
  std::vector<uint16_t> bits(static_cast<size_t>(numel_));
  copy_bytes(bits.data(), Device::cpu(), raw(), device(), nbytes());
  for (size_t i = 0; i < bits.size(); ++i)
    out[i] = dtype_ == DType::BF16 ? bf16_bits_to_float(bits[i]) : f16_bits_to_float(bits[i]);
  return out;
}

std::vector<int32_t> Tensor::to_ints() const {
  check_defined("to_ints");
  std::vector<int32_t> out(static_cast<size_t>(numel_));
  if (dtype_ == DType::I32) {
    copy_bytes(out.data(), Device::cpu(), raw(), device(), nbytes());
    return out;
  }
  LAB_CHECK(dtype_ == DType::U16, InvalidArgument, "to_ints of a ", dtype_name(dtype_), " tensor");
  std::vector<uint16_t> narrow(static_cast<size_t>(numel_));
  copy_bytes(narrow.data(), Device::cpu(), raw(), device(), nbytes());
  for (size_t i = 0; i < narrow.size(); ++i) out[i] = narrow[i];
  return out;
}

float Tensor::item() const {
  LAB_CHECK(numel_ == 1, InvalidArgument, "item() of a tensor with ", numel_, " elements");
  return to_floats()[0];
}

// ---------------------------------------------------------------- checks

void Tensor::check_defined(const char* what) const {
  LAB_CHECK(storage_ != nullptr, InvalidArgument, what, ": tensor is undefined");
}

void Tensor::check_dtype(DType expected, const char* what) const {
  check_defined(what);
  LAB_CHECK(dtype_ == expected, InvalidArgument, what, ": expected dtype ", dtype_name(expected), ", found ",
            dtype_name(dtype_));
}

void Tensor::check_shape(const Shape& expected, const char* what) const {
  check_defined(what);
  LAB_CHECK(shape_ == expected, InvalidArgument, what, ": expected shape ", shape_str(expected), ", found ",
            shape_str(shape_));
}

void Tensor::check_ndim(int expected, const char* what) const {
  check_defined(what);
  LAB_CHECK(ndim() == expected, InvalidArgument, what, ": expected ", expected, " dimensions, found shape ",
            shape_str(shape_));
}

void Tensor::check_device(Device expected, const char* what) const {
  check_defined(what);
  LAB_CHECK(device() == expected, InvalidArgument, what, ": expected a tensor on ", expected.str(), ", found ",
            device().str());
}

}  // namespace lab
