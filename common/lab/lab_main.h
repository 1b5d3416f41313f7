// The command line every kernel lab executable shares, and the run that follows it.
//
// A lab executable (named chNN_<kernel>_lab, so that scripts/lab.sh finds it) adds its own problem flags and
// these to one Flags, builds its KernelLab and calls run_lab():
//
//     int run(int argc, char** argv) {
//       int64_t rows = 4096;
//       Flags flags("ch06_layernorm_lab", "LayerNorm forward: the versions side by side");
//       flags.add_int("rows", &rows, "rows (B*T)", 1, 1 << 24);
//       kernel_lab::LabCommandLine lab_flags;
//       lab_flags.register_flags(flags);
//       if (!lab_flags.parse(flags, argc, argv)) return 0;     // --help
//       const kernel_lab::KernelLab lab = make_layernorm_lab(rows);
//       return kernel_lab::run_lab(lab, lab_flags);
//     }
//     int main(int argc, char** argv) { return lab::run_main(argc, argv, run); }
//
// Shared flags: --version N (only that version; repeatable as --version 1,3), --validate-only, --warmup,
// --repeats, --no-flush-l2, --no-cpu-ceiling, --json FILE (a bench result, checked writable before any work),
// --quick (a run of seconds: 1 warm-up, 3 repeats, and the lab's problem shrunk through quick_size(), unless
// those flags are given: numbers to check that it works, not to publish).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/lab/kernel_lab.h"
#include "common/util/flags.h"

namespace lab::kernel_lab {

struct LabCommandLine {
  std::string versions;  // "" (all) or a comma-separated list of version numbers: "2,3"
  bool validate_only = false;
  int64_t warmup = 3;
  int64_t repeats = 20;
  bool flush_l2 = true;
  bool cpu_ceiling = true;
  std::string json;
  bool quick = false;
  std::string command;  // the command line, for the result file

  void register_flags(Flags& flags);
  // Parses argv into `flags` (and so into this), checks --versions' syntax and the --json destination.
  // Returns false when --help was printed.
  bool parse(Flags& flags, int argc, char** argv);
  MeasureOptions measure_options() const;
  // With --quick, and `flag` not given: `size` becomes `quick_value` (a lab's smaller problem). After parse().
  template <typename Size>
  void quick_size(const Flags& flags, const std::string& flag, Size& size, const Size& quick_value) const {
    if (quick && !flags.was_set(flag)) size = quick_value;
  }
};

// Validates (and unless --validate-only, times) the lab's selected versions, prints the table and writes the
// --json result. Returns the exit status: 0 when every selected version passed validation or was left out
// (Version::left_out), 1 otherwise.
int run_lab(const KernelLab& lab, const LabCommandLine& command_line);

// "2,3" -> {2, 3}; Error(InvalidArgument) naming --version for anything but positive integers.
std::vector<int> parse_version_list(const std::string& text);

}  // namespace lab::kernel_lab
