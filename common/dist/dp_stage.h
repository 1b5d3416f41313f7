// How data-parallel ranks average their gradients, `--dp-stage naive|bucketed|overlap` (one file per stage:
// stage1_naive.h, stage2_bucketed.h, stage3_overlapped.h; chapter 8 teaches them, chapter 7's ZeRO builds on them).
#pragma once

#include <string>
#include <vector>

namespace lab::dist {

enum class DpStage { Naive, Bucketed, Overlap };

// "naive", "bucketed", "overlap"; parse_dp_stage throws InvalidArgument naming --dp-stage for anything else.
const char* dp_stage_name(DpStage stage);
DpStage parse_dp_stage(const std::string& name);
std::vector<std::string> dp_stage_names();

}  // namespace lab::dist
