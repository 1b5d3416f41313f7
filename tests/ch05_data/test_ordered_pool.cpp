// run_ordered: results in production order for any thread count and window, never more than `window`
// items in flight, and errors from workers or from the consumer reach the caller without a hang.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ch05_data/tokenize/ordered_pool.h"
#include "common/util/rng.h"
#include "tests/common/expect_error.h"

namespace lab::ch05 {
namespace {

// Items whose transform takes a varying time, so workers finish out of order.
void sleep_for_item(int item) {
  std::this_thread::sleep_for(std::chrono::microseconds((item * 7919) % 500));
}

TEST(OrderedPool, ResultsComeInProductionOrderWithinTheWindow) {
  for (const int threads : {1, 2, 4}) {
    for (const int window : {1, 3, 8}) {
      int next = 0, consumed = 0, most_in_flight = 0;
      std::vector<int> results;
      run_ordered<int, int>(
          threads, window,
          [&](int* item) {
            if (next == 200) return false;
            *item = next++;
            most_in_flight = std::max(most_in_flight, next - consumed);
            return true;
          },
          [](int& item) {
            sleep_for_item(item);
            return item * item;
          },
          [&](int& result) {
            results.push_back(result);
            ++consumed;
          });
      ASSERT_EQ(results.size(), 200u);
      for (int i = 0; i < 200; ++i) ASSERT_EQ(results[i], i * i) << threads << " threads, window " << window;
      EXPECT_LE(most_in_flight, window);
    }
  }
}

TEST(OrderedPool, EmptyInput) {
  int consumed = 0;
  run_ordered<int, int>(
      2, 4, [](int*) { return false; }, [](int& x) { return x; }, [&](int&) { ++consumed; });
  EXPECT_EQ(consumed, 0);
}

TEST(OrderedPool, WorkerErrorReachesTheCallerInOrder) {
  int next = 0;
  std::vector<int> results;
  lab::testing::expect_error(
      [&] {
        run_ordered<int, int>(
            3, 4,
            [&](int* item) {
              *item = next++;
              return next <= 100;
            },
            [](int& item) {
              sleep_for_item(item);
              LAB_CHECK(item != 37, Format, "item ", item, " is bad");
              return item;
            },
            [&](int& result) { results.push_back(result); });
      },
      ErrorKind::Format, {"item 37"});
  ASSERT_EQ(results.size(), 37u);  // everything before the bad item, nothing after it
  EXPECT_EQ(results.back(), 36);
}

TEST(OrderedPool, ConsumerErrorStopsTheWorkers) {
  int next = 0;
  const auto endless_run = [&] {
    run_ordered<int, int>(
        2, 4,
        [&](int* item) {
          *item = next++;
          return true;  // endless input: only the error can stop it
        },
        [](int& item) { return item; },
        [](int& result) {
          if (result == 10) throw std::runtime_error("consumer failed");
        });
  };
  EXPECT_THROW(endless_run(), std::runtime_error);
  EXPECT_LE(next, 10 + 4 + 1);  // the producer never ran more than a window ahead
}

}  // namespace
}  // namespace lab::ch05
