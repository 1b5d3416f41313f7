// Stand-in for the CUDA atomics (LAB_CUDA_EMULATION). Blocks of a grid run in parallel on several OS threads,
// so these are real atomic read-modify-writes (std::atomic_ref, relaxed like CUDA's), defined for the types
// CUDA defines them for. The value parameter does not take part in deduction, so atomicAdd(int_ptr, 1u)
// converts the value as CUDA's overloads do.
#pragma once

#include <algorithm>
#include <atomic>
#include <type_traits>

namespace lab::cuda::emu::device {

template <typename T, typename... Allowed>
concept OneOf = (std::is_same_v<T, Allowed> || ...);

template <typename T>
std::atomic_ref<T> atomic_at(T* address) {
  return std::atomic_ref<T>(*address);
}

// *address = update(*address) atomically; returns the old value.
template <typename T, typename Update>
T atomic_update(T* address, Update update) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load(std::memory_order_relaxed);
  while (!ref.compare_exchange_weak(old, update(old), std::memory_order_relaxed)) {
  }
  return old;
}

}  // namespace lab::cuda::emu::device

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, unsigned long long, float, double> T
atomicAdd(T* address, std::type_identity_t<T> value) {
  return lab::cuda::emu::device::atomic_at(address).fetch_add(value, std::memory_order_relaxed);
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int> T atomicSub(T* address, std::type_identity_t<T> value) {
  return lab::cuda::emu::device::atomic_at(address).fetch_sub(value, std::memory_order_relaxed);
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, unsigned long long, float> T
atomicExch(T* address, std::type_identity_t<T> value) {
  return lab::cuda::emu::device::atomic_at(address).exchange(value, std::memory_order_relaxed);
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, long long, unsigned long long> T
atomicMin(T* address, std::type_identity_t<T> value) {
  return lab::cuda::emu::device::atomic_update(address, [value](T old) { return std::min(old, value); });
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, long long, unsigned long long> T
atomicMax(T* address, std::type_identity_t<T> value) {
  return lab::cuda::emu::device::atomic_update(address, [value](T old) { return std::max(old, value); });
}

// Writes `value` if *address == compare; returns the old value either way.
template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, unsigned long long, unsigned short> T
atomicCAS(T* address, std::type_identity_t<T> compare, std::type_identity_t<T> value) {
  lab::cuda::emu::device::atomic_at(address).compare_exchange_strong(compare, value, std::memory_order_relaxed);
  return compare;  // on failure compare_exchange stored the old value here; on success it was equal
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, unsigned long long> T
atomicAnd(T* address, std::type_identity_t<T> value) {
  return lab::cuda::emu::device::atomic_at(address).fetch_and(value, std::memory_order_relaxed);
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, unsigned long long> T
atomicOr(T* address, std::type_identity_t<T> value) {
  return lab::cuda::emu::device::atomic_at(address).fetch_or(value, std::memory_order_relaxed);
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, unsigned long long> T
atomicXor(T* address, std::type_identity_t<T> value) {
  return lab::cuda::emu::device::atomic_at(address).fetch_xor(value, std::memory_order_relaxed);
}

// ((old >= limit) ? 0 : old + 1), and ((old == 0 || old > limit) ? limit : old - 1), as CUDA defines them.
inline unsigned int atomicInc(unsigned int* address, unsigned int limit) {
  return lab::cuda::emu::device::atomic_update(address,
                                               [limit](unsigned int old) { return old >= limit ? 0u : old + 1u; });
}
inline unsigned int atomicDec(unsigned int* address, unsigned int limit) {
  return lab::cuda::emu::device::atomic_update(
      address, [limit](unsigned int old) { return (old == 0u || old > limit) ? limit : old - 1u; });
}
