// The parallel context: how the ranks of the world are arranged into data-, tensor- and pipeline-parallel
// groups, and this rank's communicator in each. Built once at start-up from the world communicator and
// passed explicitly to whatever needs it (never a global).
//
// The layout is Megatron's: tensor parallelism varies fastest, then pipeline, then data,
//
//     rank = dp_index * (pp * tp) + pp_index * tp + tp_index,
//
// so the ranks of one tensor-parallel group, which talk after every layer, are neighbours (on one node,
// on NVLink), and the data-parallel group, which talks once per step, spans the farthest ranks.
// With dp 2, tp 2, pp 1 on 4 ranks: tp groups {0,1} {2,3}, dp groups {0,2} {1,3}, pp groups {0} {1} {2} {3}.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/comm/communicator.h"

namespace lab::comm {

// The sizes of the three dimensions; their product is the number of ranks.
struct ParallelLayout {
  int dp = 1;
  int tp = 1;
  int pp = 1;

  int ranks() const { return dp * tp * pp; }
  std::string str() const;  // "dp 2 x tp 2 x pp 1"
};

// A rank's position in each dimension (0-based).
struct ParallelCoords {
  int dp = 0;
  int tp = 0;
  int pp = 0;
  bool operator==(const ParallelCoords&) const = default;
};

// The arithmetic of the layout: a rank's coordinates, and the rank at given coordinates.
// InvalidArgument when a size is not positive or the rank (coordinate) is out of range.
ParallelCoords coords_of_rank(const ParallelLayout& layout, int rank);
int rank_of_coords(const ParallelLayout& layout, const ParallelCoords& coords);

class ParallelContext {
 public:
  // Collective over `world`: three splits. InvalidArgument when dp * tp * pp is not world.size(). `world`
  // must outlive the context.
  ParallelContext(Communicator& world, const ParallelLayout& layout);

  const ParallelLayout& layout() const { return layout_; }
  const ParallelCoords& coords() const { return coords_; }

  Communicator& world() const { return world_; }
  // This rank's group in each dimension; its rank in the group is its coordinate there
  // (dp().rank() == coords().dp, and so on).
  Communicator& dp() const { return *dp_; }
  Communicator& tp() const { return *tp_; }
  Communicator& pp() const { return *pp_; }

  // The neighbouring pipeline stages, as ranks of pp(): activations come from prev_stage() and go to
  // next_stage(); none before the first stage or after the last.
  std::optional<int> prev_stage() const;
  std::optional<int> next_stage() const;
  bool is_first_stage() const { return coords_.pp == 0; }
  bool is_last_stage() const { return coords_.pp == layout_.pp - 1; }

  // One line for the start of a run: "rank 3: dp 1/2, tp 1/2, pp 0/1".
  std::string describe() const;

 private:
  Communicator& world_;
  ParallelLayout layout_;
  ParallelCoords coords_;
  std::unique_ptr<Communicator> dp_;
  std::unique_ptr<Communicator> tp_;
  std::unique_ptr<Communicator> pp_;
};

}  // namespace lab::comm
