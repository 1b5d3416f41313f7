// gpt2_train: trains GPT-2. See `gpt2_train --help` and ch10_gpt2/README.md.
#include <cstdio>

#include "ch10_gpt2/trainer.h"
#include "common/util/main.h"

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, [](int argc, char** argv) {
    lab::TrainOptions options;
    if (!lab::parse_train_options(argc, argv, options)) return 0;
    lab::Trainer trainer(options);
    const lab::TrainSummary s = trainer.run();
    std::printf("done: %lld steps in %.1f s, final train loss %.4f, val loss %.4f\n", static_cast<long long>(s.steps),
                s.seconds, s.last_loss, s.last_val_loss);
    return 0;
  });
}
