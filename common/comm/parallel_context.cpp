// The layout arithmetic and the three splits of the world into groups.
#include "common/comm/parallel_context.h"

namespace lab::comm {

std::string ParallelLayout::str() const {
  return cat("dp ", dp, " x tp ", tp, " x pp ", pp);
}

namespace {

void check_layout(const ParallelLayout& layout) {
  LAB_CHECK(layout.dp >= 1 && layout.tp >= 1 && layout.pp >= 1, InvalidArgument,
            "parallel layout sizes must be positive, got ", layout.str());
}

}  // namespace

ParallelCoords coords_of_rank(const ParallelLayout& layout, int rank) {
  check_layout(layout);
  LAB_CHECK(0 <= rank && rank < layout.ranks(), InvalidArgument, "rank ", rank, " is not in the layout ", layout.str(),
            " (", layout.ranks(), " ranks)");
  return {.dp = rank / (layout.pp * layout.tp), .tp = rank % layout.tp, .pp = rank / layout.tp % layout.pp};
}

int rank_of_coords(const ParallelLayout& layout, const ParallelCoords& coords) {
  check_layout(layout);
  LAB_CHECK(0 <= coords.dp && coords.dp < layout.dp && 0 <= coords.tp && coords.tp < layout.tp && 0 <= coords.pp &&
                coords.pp < layout.pp,
            InvalidArgument, "coordinates dp ", coords.dp, ", tp ", coords.tp, ", pp ", coords.pp,
            " are outside the layout ", layout.str());
  return coords.dp * (layout.pp * layout.tp) + coords.pp * layout.tp + coords.tp;
}

ParallelContext::ParallelContext(Communicator& world, const ParallelLayout& layout) : world_(world), layout_(layout) {
  check_layout(layout);
  LAB_CHECK(layout.ranks() == world.size(), InvalidArgument, "the parallel layout ", layout.str(), " needs ",
            layout.ranks(), " ranks, but the world has ", world.size());
  coords_ = coords_of_rank(layout, world.rank());
  const ParallelCoords& c = coords_;
  // Each split's color numbers the group by the other two coordinates; the key orders it by its own.
  tp_ = world.split(c.dp * layout.pp + c.pp, c.tp);
  pp_ = world.split(c.dp * layout.tp + c.tp, c.pp);
  dp_ = world.split(c.pp * layout.tp + c.tp, c.dp);
}

std::optional<int> ParallelContext::prev_stage() const {
  if (is_first_stage()) return std::nullopt;
  return coords_.pp - 1;
}

std::optional<int> ParallelContext::next_stage() const {
  if (is_last_stage()) return std::nullopt;
  return coords_.pp + 1;
}

std::string ParallelContext::describe() const {
  return cat("rank ", world_.rank(), ": dp ", coords_.dp, "/", layout_.dp, ", tp ", coords_.tp, "/", layout_.tp,
             ", pp ", coords_.pp, "/", layout_.pp);
}

}  // namespace lab::comm
