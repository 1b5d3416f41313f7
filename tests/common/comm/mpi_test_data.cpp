// The exactly reducible inputs of the tests under mpirun, and their expected reductions.
#include "tests/common/comm/mpi_test_data.h"

#include <algorithm>
#include <random>

#include "common/util/rng.h"

namespace lab::testing {

uint64_t shared_seed(comm::Communicator& comm, Device device) {
  const int32_t mine = static_cast<int32_t>(std::random_device{}() & 0x7fffffffu);
  Tensor seed = Tensor::from_ints(std::vector<int32_t>{mine}, {1}).to(device);
  comm.broadcast(seed, 0);
  return static_cast<uint64_t>(seed.to_ints()[0]);
}

std::vector<int32_t> small_ints(uint64_t seed, int rank, int64_t count) {
  Rng rng(seed * 1009 + static_cast<uint64_t>(rank));
  std::vector<int32_t> ks(static_cast<size_t>(count));
  for (int32_t& k : ks) k = static_cast<int32_t>(rng.below(127)) - 63;
  return ks;
}

std::vector<std::vector<int32_t>> small_ints_of_every_rank(uint64_t seed, int ranks, int64_t count) {
  std::vector<std::vector<int32_t>> ks(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) ks[r] = small_ints(seed, r, count);
  return ks;
}

namespace {

float round_to(float value, DType dtype) {
  switch (dtype) {
    case DType::BF16: return bf16_bits_to_float(float_to_bf16_bits(value));
    case DType::F16: return f16_bits_to_float(float_to_f16_bits(value));
    default: return value;
  }
}

bool is_floating(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
}

}  // namespace

Tensor tensor_of(const std::vector<int32_t>& ks, DType dtype, Device device) {
  const int64_t count = static_cast<int64_t>(ks.size());
  Tensor host;
  if (dtype == DType::I32) {
    host = Tensor::from_ints(ks, {count});
  } else if (dtype == DType::U16) {
    host = Tensor::empty({count}, DType::U16);
    auto* data = host.data<uint16_t>();
    for (int64_t i = 0; i < count; ++i) data[i] = static_cast<uint16_t>(ks[i] + 63);
  } else {
    std::vector<float> values(ks.size());
    for (size_t i = 0; i < ks.size(); ++i) values[i] = static_cast<float>(ks[i]) / 4.0f;
    host = Tensor::from_floats(values, {count});
    if (dtype != DType::F32) host = host.to_dtype(dtype);
  }
  return device.is_cpu() ? host : host.to(device);
}

std::vector<float> values_of(const Tensor& tensor) {
  if (is_floating(tensor.dtype())) return tensor.to_floats();
  const std::vector<int32_t> ints = tensor.to_ints();
  return std::vector<float>(ints.begin(), ints.end());
}

std::vector<float> expected_reduction(const std::vector<std::vector<int32_t>>& ks_by_rank, int64_t begin, int64_t count,
                                      DType dtype, comm::ReduceOp op) {
  const float scale = is_floating(dtype) ? 0.25f : 1.0f;
  std::vector<float> expected(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int32_t sum = 0;
    int32_t max = ks_by_rank[0][begin + i];
    for (const std::vector<int32_t>& ks : ks_by_rank) {
      sum += ks[begin + i];
      max = std::max(max, ks[begin + i]);
    }
    float value = static_cast<float>(op == comm::ReduceOp::Max ? max : sum) * scale;
    if (op == comm::ReduceOp::Avg) value /= static_cast<float>(ks_by_rank.size());
    expected[i] = round_to(value, dtype);
  }
  return expected;
}

}  // namespace lab::testing
