// A stage's neighbours (see stage_link.h).
#include "ch08_distributed/pp/stage_link.h"

namespace lab::ch08::pp {

int StageLink::prev() const {
  LAB_CHECK(!is_first(), InvalidArgument, "pipeline stage 0 has no previous stage");
  return stage() - 1;
}

int StageLink::next() const {
  LAB_CHECK(!is_last(), InvalidArgument, "pipeline stage ", stage(), " is the last of ", stages());
  return stage() + 1;
}

}  // namespace lab::ch08::pp
