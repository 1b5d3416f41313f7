// The device clock (common/core/device_clock.h) on the CPU: marks in the steady clock's time, spans between them,
// clear() starting the numbering again, and a span between marks that do not exist refused. Its GPU side (events
// on the current stream, read without synchronising in between) is tested with the streams
// (tests/common/cuda/test_stream.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/core/device_clock.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

TEST(DeviceClock, OnTheCpuMarksTheHostsTime) {
  DeviceClock clock(Device::cpu());
  const int start = clock.mark();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int middle = clock.mark();
  const int end = clock.mark();
  EXPECT_EQ(start, 0);
  EXPECT_EQ(end, 2);
  EXPECT_GE(clock.seconds(start, middle), 0.019);
  EXPECT_GE(clock.seconds(start, end), clock.seconds(start, middle));
  EXPECT_EQ(clock.seconds(middle, middle), 0.0);

  clock.clear();
  EXPECT_EQ(clock.marks(), 0);
  EXPECT_EQ(clock.mark(), 0);
  EXPECT_LT(clock.seconds(0, 0), 1e-9);
  testing::expect_error([&] { clock.seconds(0, 1); }, ErrorKind::InvalidArgument, {"no span from mark 0 to mark 1"});
  testing::expect_error([&] { clock.seconds(-1, 0); }, ErrorKind::InvalidArgument, {"DeviceClock"});
}

}  // namespace
}  // namespace lab
