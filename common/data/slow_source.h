// A simulated slow data source, for measuring what each loader stage can hide.
//
// A real input pipeline pays two kinds of cost per batch, and they behave differently under prefetching:
//   - waiting for storage: a remote object store or a network file system answers in milliseconds
//     whatever the request's size. Waiting costs time but no CPU, so it overlaps freely with training.
//   - CPU work: decoding, augmenting, tokenizing on the fly. It costs a core for as long as it runs, so
//     moving it to a background thread helps only where a core is free.
// Both are paid once per batch, on the thread where the loader stage really pays them: the training
// thread for the synchronous stages, the reader threads for the background ones.
#pragma once

#include <cstdint>

namespace lab {

struct SlowSource {
  int64_t read_latency_us = 0;  // a sleep per batch read
  int64_t preprocess_us = 0;    // CPU time burned per batch, on the thread's own CPU clock

  bool active() const { return read_latency_us > 0 || preprocess_us > 0; }
  // Sleeps for the latency, then spins until this thread has used preprocess_us of CPU time. The CPU
  // clock, not the wall clock, so that a thread which loses its core to others still does the full
  // amount of work and takes longer, as real preprocessing would.
  void pay() const;
};

}  // namespace lab
