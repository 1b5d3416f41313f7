// Lines, means and stop requests agreed over a communicator (see rank_coordination.h).
#include "common/dist/rank_coordination.h"

#include <algorithm>

namespace lab::dist {

namespace {
constexpr int64_t kLineBytes = 256;  // a line and its terminating zero
}  // namespace

std::vector<std::string> gather_lines(comm::Communicator& comm, const std::string& line) {
  // Bytes travel as int32 (the communicator's integer dtype), one per element.
  std::vector<int32_t> mine(kLineBytes, 0);
  for (size_t i = 0; i < line.size() && i + 1 < static_cast<size_t>(kLineBytes); ++i)
    mine[i] = static_cast<unsigned char>(line[i]);
  const Tensor input = Tensor::empty({kLineBytes}, DType::I32);
  std::copy(mine.begin(), mine.end(), input.data<int32_t>());
  const Tensor all = Tensor::empty({comm.size() * kLineBytes}, DType::I32);
  comm.all_gather(input, all);
  std::vector<std::string> lines;
  for (int r = 0; r < comm.size(); ++r) {
    const int32_t* bytes = all.data<int32_t>() + r * kLineBytes;
    std::string text;
    for (int64_t i = 0; i < kLineBytes && bytes[i] != 0; ++i) text.push_back(static_cast<char>(bytes[i]));
    lines.push_back(text);
  }
  return lines;
}

double mean_over(comm::Communicator& comm, double value, Device device) {
  if (comm.size() == 1) return value;
  const std::vector<float> host{static_cast<float>(value)};
  const Tensor t = Tensor::from_floats(host, {1}, device);
  comm.all_reduce(t, comm::ReduceOp::Avg);
  return t.to_floats()[0];
}

int agree_on_stop(comm::Communicator& world, int local_signal) {
  if (world.size() == 1) return local_signal;
  const Tensor flag = Tensor::empty({1}, DType::I32);
  flag.data<int32_t>()[0] = local_signal;
  world.all_reduce(flag, comm::ReduceOp::Max);
  return flag.data<int32_t>()[0];
}

}  // namespace lab::dist
