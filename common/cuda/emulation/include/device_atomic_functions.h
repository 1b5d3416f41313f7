// Stand-in for the CUDA atomics (LAB_CUDA_EMULATION). Blocks of a grid run in parallel on several OS threads,
// so these are real atomic read-modify-writes, relaxed like CUDA's, defined for the types CUDA defines them
// for. The value parameter does not take part in deduction, so atomicAdd(int_ptr, 1u) converts the value as
// CUDA's overloads do.
//
// They are written on the GCC/Clang `__atomic` builtins, which act on a plain object as CUDA's atomics do,
// rather than on std::atomic_ref: the builtins come with the compiler and so with every standard library,
// where std::atomic_ref is missing from some (libc++ 16). The builtins' arithmetic is for integers only, so
// a floating-point addition is a compare-and-swap loop, as std::atomic_ref's is.
#pragma once

#include <algorithm>
#include <type_traits>

namespace lab::cuda::emu::device {

template <typename T, typename... Allowed>
concept OneOf = (std::is_same_v<T, Allowed> || ...);

// *address = update(*address) atomically; returns the old value.
template <typename T, typename Update>
T atomic_update(T* address, Update update) {
  T old;
  __atomic_load(address, &old, __ATOMIC_RELAXED);
  T desired;
  do {
    desired = update(old);  // a failed exchange has stored the current value in `old`
  } while (!__atomic_compare_exchange(address, &old, &desired, /*weak=*/true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}

}  // namespace lab::cuda::emu::device

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, unsigned long long, float, double> T
atomicAdd(T* address, std::type_identity_t<T> value) {
  if constexpr (std::is_floating_point_v<T>) {
    return lab::cuda::emu::device::atomic_update(address, [value](T old) { return old + value; });
  } else {
    return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
  }
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int> T atomicSub(T* address, std::type_identity_t<T> value) {
  return __atomic_fetch_sub(address, value, __ATOMIC_RELAXED);
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, unsigned long long, float> T
atomicExch(T* address, std::type_identity_t<T> value) {
  T old;
  __atomic_exchange(address, &value, &old, __ATOMIC_RELAXED);  // the generic form: it takes a float too
  return old;
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
  __atomic_compare_exchange_n(address, &compare, value, /*weak=*/false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;  // on failure the exchange stored the old value here; on success it was equal
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, unsigned long long> T
atomicAnd(T* address, std::type_identity_t<T> value) {
  return __atomic_fetch_and(address, value, __ATOMIC_RELAXED);
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, unsigned long long> T
atomicOr(T* address, std::type_identity_t<T> value) {
  return __atomic_fetch_or(address, value, __ATOMIC_RELAXED);
}

template <typename T>
requires lab::cuda::emu::device::OneOf<T, int, unsigned int, unsigned long long> T
atomicXor(T* address, std::type_identity_t<T> value) {
  return __atomic_fetch_xor(address, value, __ATOMIC_RELAXED);
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
