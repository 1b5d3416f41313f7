// gpt2_train: trains GPT-2. See `gpt2_train --help` and ch10_gpt2/README.md.
//
// Exit status: 0 when the run completes; 1 with one line on stderr for any error (nothing is trained when the
// error is in the flags, the data or an output path); 130 after SIGINT and 143 after SIGTERM, which stop the
// run at the next step boundary after writing a checkpoint when --save was given (stop_signals.h).
#include <cstdio>

#include "ch10_gpt2/stop_signals.h"
#include "ch10_gpt2/trainer.h"
#include "common/util/main.h"

namespace {

int train(int argc, char** argv) {
  lab::TrainOptions options;
  if (!lab::parse_train_options(argc, argv, options)) return 0;
  lab::install_stop_handlers("gpt2_train");
  try {
    lab::Trainer trainer(options);
    const lab::TrainSummary s = trainer.run([] { return lab::stop_signal() != 0; });
    if (s.interrupted) {
      const long long step = s.steps;
      if (s.checkpoint_step == s.steps)
        std::printf("interrupted at step %lld; checkpoint at %s\n", step, options.save.c_str());
      else if (options.save.empty())
        std::printf("interrupted at step %lld; no checkpoint written (no --save given)\n", step);
      else
        std::printf("interrupted at step %lld; no checkpoint written (no step was trained)\n", step);
      std::fflush(stdout);
      return 128 + lab::stop_signal();
    }
    char val[32] = "none (no --data-val)";
    if (trainer.has_validation()) std::snprintf(val, sizeof val, "%.4f", s.last_val_loss);
    std::printf("done: %lld steps in %.1f s, final train loss %.4f, val loss %s\n", static_cast<long long>(s.steps),
                s.seconds, s.last_loss, val);
    return 0;
  } catch (const lab::Error& e) {
    throw lab::Error(e.kind(), options.with_preset_note(e.what()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, train);
}
