// SIGINT and SIGTERM as a request to stop cleanly: the trainer finishes the step it is in, writes a
// checkpoint when it was asked to save, says where it stopped, and exits with 128 + the signal's number
// (130 for SIGINT, 143 for SIGTERM), as a shell reports a process killed by that signal.
//
// The handler only records the signal in a lock-free atomic and writes a fixed message with write(2) (both
// async-signal-safe), so the user sees that the signal arrived; the training loop polls stop_signal() between
// steps. A second signal means "now": the handler writes another fixed message and calls _exit(2). Exiting at any
// instant is safe for the checkpoints because AtomicDirectory publishes a checkpoint in one atomic rename or exchange
// of a fully written, fsynced directory: the process can only die before it (the old checkpoint is in place, plus a
// stale "<dir>.tmp" that the next run removes and reports) or after it (the new one is in place).
#pragma once

namespace lab {

// Installs the handlers for SIGINT and SIGTERM. `program` names the process in the second signal's message.
void install_stop_handlers(const char* program);

// The signal that asked to stop (SIGINT or SIGTERM), or 0 when none has arrived.
int stop_signal();

}  // namespace lab
