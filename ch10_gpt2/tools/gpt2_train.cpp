// gpt2_train: trains GPT-2. See `gpt2_train --help` and ch10_gpt2/README.md; under mpirun, the parallel layouts
// of chapter 8 (`mpirun -np 4 gpt2_train --dp 2 --tp 2`, ch08_distributed/README.md).
//
// Exit status: 0 when the run completes; 1 with one line on stderr for any error (nothing is trained when the
// error is in the flags, the data or an output path; under mpirun the line names the rank, and an error on any
// rank ends the job); 130 after SIGINT and 143 after SIGTERM, which stop the run at the next step boundary after
// writing a checkpoint when --save was given (stop_signals.h). Under mpirun a signal to any rank stops every rank
// before the same step.
#include <cstdio>

#include "ch10_gpt2/stop_signals.h"
#include "ch10_gpt2/trainer.h"
#include "common/comm/world.h"
#include "common/util/main.h"

namespace {

int train(int argc, char** argv) {
  lab::comm::World world;  // inside run_main's body, so that an error unwinds through it (world.h)
  lab::comm::Communicator& comm = world.comm();
  lab::TrainOptions options;
  try {
    if (!lab::parse_train_options(argc, argv, options, comm.rank() == 0)) return 0;
    lab::install_stop_handlers("gpt2_train");
    lab::Trainer trainer(options, comm);
    const lab::TrainSummary s = trainer.run(lab::stop_signal);
    if (!trainer.leader()) return s.interrupted ? 128 + s.stop_signal : 0;
    if (s.interrupted) {
      const long long step = s.steps;
      if (s.checkpoint_step == s.steps)
        std::printf("interrupted at step %lld; checkpoint at %s\n", step, options.save.c_str());
      else if (options.save.empty())
        std::printf("interrupted at step %lld; no checkpoint written (no --save given)\n", step);
      else
        std::printf("interrupted at step %lld; no checkpoint written (no step was trained)\n", step);
      std::fflush(stdout);
      return 128 + s.stop_signal;
    }
    if (options.find_max_batch) return 0;  // the search printed its result and trained nothing
    char val[32] = "none (no --data-val)";
    if (trainer.has_validation()) std::snprintf(val, sizeof val, "%.4f", s.last_val_loss);
    std::printf("done: %lld steps in %.1f s, final train loss %.4f, val loss %s\n", static_cast<long long>(s.steps),
                s.seconds, s.last_loss, val);
    if (s.checkpoint_step == s.steps)
      std::printf(
          "saved in %s: generate text with  gpt2_sample --load %s --prompt \"ROMEO:\"  or train on with  "
          "gpt2_train --resume %s --save %s --steps %lld\n",
          options.save.c_str(), options.save.c_str(), options.save.c_str(), options.save.c_str(),
          static_cast<long long>(2 * s.steps));
    return 0;
  } catch (const lab::Error& e) {
    const std::string where = comm.size() > 1 ? lab::cat("rank ", comm.rank(), "/", comm.size(), ": ") : "";
    throw lab::Error(e.kind(), where + options.with_preset_note(e.what()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, train);
}
