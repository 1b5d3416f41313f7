// GPipe and 1F1B as lists of actions (see schedule.h).
#include "ch08_distributed/pp/schedule.h"

#include <algorithm>

#include "common/core/error.h"

namespace lab::ch08::pp {

namespace {

// Builds one stage's list; the transfers that a first or last stage does not have are left out.
class ScheduleBuilder {
 public:
  ScheduleBuilder(int stage, int stages) : first_(stage == 0), last_(stage == stages - 1) {}

  void recv_activation(int m) { add(!first_, PipeOp::RecvActivation, m); }
  void forward(int m) { add(true, PipeOp::Forward, m); }
  void send_activation(int m) { add(!last_, PipeOp::SendActivation, m); }
  void recv_gradient(int m) { add(!last_, PipeOp::RecvGradient, m); }
  void backward(int m) { add(true, PipeOp::Backward, m); }
  void send_gradient(int m) { add(!first_, PipeOp::SendGradient, m); }

  std::vector<PipeAction> take() { return std::move(actions_); }

 private:
  void add(bool present, PipeOp op, int m) {
    if (present) actions_.push_back({op, m});
  }
  bool first_, last_;
  std::vector<PipeAction> actions_;
};

std::vector<PipeAction> gpipe(int stage, int stages, int M) {
  ScheduleBuilder s(stage, stages);
  for (int m = 0; m < M; ++m) {
    s.recv_activation(m);
    s.forward(m);
    s.send_activation(m);
  }
  for (int m = 0; m < M; ++m) {
    s.recv_gradient(m);
    s.backward(m);
    s.send_gradient(m);
  }
  return s.take();
}

// Megatron-LM's forward_backward_pipelining_without_interleaving, its batched exchanges written as two
// blocking transfers each (the earlier stage sends first: see schedule.h).
std::vector<PipeAction> one_f_one_b(int stage, int stages, int M) {
  ScheduleBuilder s(stage, stages);
  const int warmup = std::min(stages - stage - 1, M);
  const int steady = M - warmup;
  for (int m = 0; m < warmup; ++m) {
    s.recv_activation(m);
    s.forward(m);
    s.send_activation(m);
  }
  if (steady > 0) s.recv_activation(warmup);
  for (int i = 0; i < steady; ++i) {
    const int m = warmup + i;  // this iteration's forward; its backward is micro-batch i
    s.forward(m);
    s.send_activation(m);  // with the next stage: send, then receive
    s.recv_gradient(i);
    s.backward(i);
    if (i + 1 < steady) {
      s.recv_activation(m + 1);  // with the previous stage: receive, then send
      s.send_gradient(i);
    } else {
      s.send_gradient(i);
    }
  }
  for (int i = steady; i < M; ++i) {
    s.recv_gradient(i);
    s.backward(i);
    s.send_gradient(i);
  }
  return s.take();
}

}  // namespace

std::string action_name(const PipeAction& a) {
  const char* prefix = "?";
  switch (a.op) {
    case PipeOp::RecvActivation: prefix = "ra"; break;
    case PipeOp::Forward: prefix = "F"; break;
    case PipeOp::SendActivation: prefix = "sa"; break;
    case PipeOp::RecvGradient: prefix = "rg"; break;
    case PipeOp::Backward: prefix = "B"; break;
    case PipeOp::SendGradient: prefix = "sg"; break;
  }
  return cat(prefix, a.micro_batch);
}

std::string schedule_str(const std::vector<PipeAction>& actions) {
  std::string s;
  for (const PipeAction& a : actions) {
    if (!s.empty()) s += ' ';
    s += action_name(a);
  }
  return s;
}

std::vector<PipeAction> pipeline_schedule(PpSchedule schedule, int stage, int stages, int micro_batches) {
  LAB_CHECK(stages >= 1 && 0 <= stage && stage < stages, InvalidArgument, "pipeline stage ", stage, " of ", stages,
            " does not exist");
  LAB_CHECK(micro_batches >= 1, InvalidArgument, "a pipeline step needs at least one micro-batch, got ", micro_batches);
  return schedule == PpSchedule::GPipe ? gpipe(stage, stages, micro_batches)
                                       : one_f_one_b(stage, stages, micro_batches);
}

int peak_live_micro_batches(const std::vector<PipeAction>& actions) {
  int live = 0, peak = 0;
  for (const PipeAction& a : actions) {
    if (a.op == PipeOp::Forward) peak = std::max(peak, ++live);
    if (a.op == PipeOp::Backward) --live;
  }
  return peak;
}

double ideal_bubble_fraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

}  // namespace lab::ch08::pp
