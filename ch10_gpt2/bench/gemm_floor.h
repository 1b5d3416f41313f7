// The CPU's GEMM floor of a training step: the time the step's own sgemm calls take when each shape is run
// alone, through the same sgemm on the same threads.
//
// A floor measured once, before or after the steps, is at the mercy of the machine's load at that moment: on a
// loaded VM small shapes timed at exactly 8.00 ms each (a timer tick of the hypervisor) gave a floor above the
// step itself. So the floor is sampled between the timed steps (sample() after each, and again after the last),
// and each shape's time is the fastest of its samples: load only ever makes a run slower. spread() says how far
// the samples' totals were apart, so the bench can warn when the floor is uncertain.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/ops/cpu/gemm.h"

namespace lab {

class GemmFloor {
 public:
  // The distinct shapes of `calls` (one step's sgemm calls) and how often each is called; operands are
  // allocated once for the largest shape and filled with random values.
  explicit GemmFloor(const std::vector<ops::cpu::GemmShape>& calls);

  // Times every shape once (after one untimed run of it, as the step's own call finds its operands warm).
  void sample();
  int samples() const { return samples_; }

  // The floor: sum over shapes of calls x the fastest sample. 0 before any sample.
  double seconds() const;
  double flops() const;  // of one step's sgemm calls
  // The slowest sample's total over the fastest's (1 = no spread); 0 before any sample.
  double spread() const;
  // One line per shape: calls, shape, fastest time, GFLOP/s.
  std::string table() const;
  size_t calls() const { return calls_; }
  size_t shapes() const { return shapes_.size(); }

 private:
  struct Shape {
    ops::cpu::GemmShape shape;
    int calls = 0;
    double fastest = 0;  // seconds; 0 before any sample
  };
  std::vector<Shape> shapes_;
  size_t calls_ = 0;
  std::vector<float> a_, b_, c_;
  std::vector<double> totals_;  // each sample's floor: sum of calls x that sample's time
  int samples_ = 0;
};

}  // namespace lab
