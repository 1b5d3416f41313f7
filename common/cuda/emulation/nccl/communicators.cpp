// The stand-in's communicators: the unique id, the bootstrap of ncclCommInitRank over MPI_COMM_WORLD,
// ncclCommSplit, destroy and abort, and the queries.
//
// The bootstrap works as NCCL's does, with MPI messages instead of sockets: the id names a meeting point
// (the MPI_COMM_WORLD rank of the process that made it, and a message tag of its own); every other rank
// tells that process its rank, world rank and GPU, and receives from it the table of all members, from which
// each builds the communicator's MPI group (MPI_Comm_create_group is collective over the members only).
// As NCCL does, the meeting refuses two ranks on one GPU of one host ("Duplicate GPU detected"): every rank
// of the communicator gets ncclInvalidUsage. The emulated GPUs of a host are the same GPUs in every process
// (device i of one process is device i of the others), as a machine's GPUs are.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/cuda/emulation/device.h"
#include "common/cuda/emulation/nccl/state.h"

using namespace lab::cuda::emu;
using namespace lab::cuda::emu::nccl;

namespace {

struct IdContents {
  char magic[16];
  int root;  // the MPI_COMM_WORLD rank of the process that made the id: rank 0 of the communicator
  int tag;   // the MPI tag of this bootstrap's messages
};
static_assert(sizeof(IdContents) <= sizeof(ncclUniqueId));

constexpr char kIdMagic[16] = "lab-emu-nccl-id";
// Tags of bootstrap messages on MPI_COMM_WORLD: [4096, 20480), below the 32767 every MPI allows.
constexpr int kFirstBootstrapTag = 1 << 12;
constexpr int kBootstrapTags = 1 << 14;

ncclResult_t check_mpi(const char* call) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return fail(ncclInvalidUsage, text(call,
                                       ": the NCCL stand-in of the emulation build runs over MPI, which is not running "
                                       "in this process (start the program under mpirun)"));
  int level = 0;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE)
    return fail(ncclInvalidUsage, text(call,
                                       ": the NCCL stand-in needs MPI_THREAD_MULTIPLE (its operations run on "
                                       "the stream threads)"));
  return ncclSuccess;
}

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// This process's host, as a number: ranks with equal numbers share a machine and so its GPUs.
int host_number() {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof(name) - 1);
  return static_cast<int>(std::hash<std::string>{}(name)&0x7fffffff);
}

// What a rank tells the meeting point, and what the meeting point answers.
struct Joining {
  int rank, world_rank, host, device;
};
// The answer: the members (world ranks, by rank) after a verdict; a refused meeting names the two ranks
// that share a GPU, and the GPU.
struct Verdict {
  int refused, first, second, device;
};

// Fills `members` (world ranks, by rank in the new communicator) through the meeting point of `id`.
ncclResult_t exchange_members(const IdContents& id, int rank, int device, std::vector<int>& members) {
  const int nranks = static_cast<int>(members.size());
  const auto mpi_failed = [](int code) {
    return fail(ncclSystemError, text("ncclCommInitRank: the bootstrap failed: ", mpi_error_text(code)));
  };
  constexpr int kJoiningInts = sizeof(Joining) / sizeof(int), kVerdictInts = sizeof(Verdict) / sizeof(int);
  std::vector<int> answer(static_cast<size_t>(kVerdictInts + nranks));
  Verdict verdict{};
  if (rank != 0) {
    const Joining mine{rank, world_rank(), host_number(), device};
    if (const int code = MPI_Send(&mine, kJoiningInts, MPI_INT, id.root, id.tag, MPI_COMM_WORLD); code != MPI_SUCCESS)
      return mpi_failed(code);
    if (const int code = MPI_Recv(answer.data(), static_cast<int>(answer.size()), MPI_INT, id.root, id.tag,
                                  MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        code != MPI_SUCCESS)
      return mpi_failed(code);
    std::memcpy(&verdict, answer.data(), sizeof(verdict));
  } else {
    if (world_rank() != id.root)
      return fail(ncclInvalidUsage,
                  "ncclCommInitRank: rank 0 must be the process that called ncclGetUniqueId (the "
                  "stand-in's bootstrap meets there)");
    std::vector<Joining> joined(static_cast<size_t>(nranks));
    std::vector<bool> arrived(static_cast<size_t>(nranks), false);
    joined[0] = Joining{0, id.root, host_number(), device};
    arrived[0] = true;
    for (int i = 1; i < nranks; ++i) {
      Joining theirs{};
      if (const int code =
              MPI_Recv(&theirs, kJoiningInts, MPI_INT, MPI_ANY_SOURCE, id.tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          code != MPI_SUCCESS)
        return mpi_failed(code);
      if (theirs.rank <= 0 || theirs.rank >= nranks || arrived[static_cast<size_t>(theirs.rank)])
        return fail(ncclInvalidUsage, text("ncclCommInitRank: world rank ", theirs.world_rank, " joined as rank ",
                                           theirs.rank, ", which is out of range or taken (", nranks, " ranks)"));
      joined[static_cast<size_t>(theirs.rank)] = theirs;
      arrived[static_cast<size_t>(theirs.rank)] = true;
    }
    for (int r = 0; r < nranks && !verdict.refused; ++r)
      for (int q = 0; q < r; ++q) {
        const Joining &a = joined[static_cast<size_t>(q)], &b = joined[static_cast<size_t>(r)];
        if (a.host == b.host && a.device == b.device) {
          verdict = Verdict{1, r, q, a.device};
          break;
        }
      }
    std::memcpy(answer.data(), &verdict, sizeof(verdict));
    for (int r = 0; r < nranks; ++r)
      answer[static_cast<size_t>(kVerdictInts + r)] = joined[static_cast<size_t>(r)].world_rank;
    for (int r = 1; r < nranks; ++r)
      if (const int code = MPI_Send(answer.data(), static_cast<int>(answer.size()), MPI_INT,
                                    joined[static_cast<size_t>(r)].world_rank, id.tag, MPI_COMM_WORLD);
          code != MPI_SUCCESS)
        return mpi_failed(code);
  }
  if (verdict.refused)
    return fail(ncclInvalidUsage,
                text("ncclCommInitRank: Duplicate GPU detected : rank ", verdict.first, " and rank ", verdict.second,
                     " both on CUDA device ", verdict.device, " (NCCL needs one GPU per rank)"));
  std::copy(answer.begin() + kVerdictInts, answer.end(), members.begin());
  return ncclSuccess;
}

}  // namespace

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  if (unique_id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  if (const ncclResult_t mpi = check_mpi("ncclGetUniqueId"); mpi != ncclSuccess) return mpi;
  static std::atomic<int> made{0};
  IdContents id{};
  std::memcpy(id.magic, kIdMagic, sizeof(kIdMagic));
  id.root = world_rank();
  id.tag = kFirstBootstrapTag + made++ % kBootstrapTags;
  *unique_id = ncclUniqueId{};
  std::memcpy(unique_id->internal, &id, sizeof(id));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, text("ncclCommInitRank: rank ", rank, " is not in [0, ", nranks, ")"));
  if (const ncclResult_t mpi = check_mpi("ncclCommInitRank"); mpi != ncclSuccess) return mpi;
  IdContents id;
  std::memcpy(&id, comm_id.internal, sizeof(id));
  if (std::memcmp(id.magic, kIdMagic, sizeof(kIdMagic)) != 0)
    return fail(ncclInvalidArgument, "ncclCommInitRank: the id was not made by ncclGetUniqueId");
  const int device = current_device();
  if (!valid_device(device)) return fail(ncclUnhandledCudaError, "ncclCommInitRank: no valid current device");

  std::vector<int> members(static_cast<size_t>(nranks));
  if (const ncclResult_t exchanged = exchange_members(id, rank, device, members); exchanged != ncclSuccess)
    return exchanged;
  MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  MPI_Comm data = MPI_COMM_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, nranks, members.data(), &group);
  const int code = MPI_Comm_create_group(MPI_COMM_WORLD, group, id.tag, &data);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  if (code != MPI_SUCCESS)
    return fail(ncclSystemError, text("ncclCommInitRank: MPI_Comm_create_group failed: ", mpi_error_text(code)));
  *comm = new ncclComm{std::make_shared<CommState>(data, device)};
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (comm == nullptr || newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommSplit: comm or newcomm is NULL");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return fail(ncclInvalidArgument, text("ncclCommSplit: color ", color, " is negative (NCCL_SPLIT_NOCOLOR is -1)"));
  if (config != nullptr && config->magic != 0xcafebeef)
    return fail(ncclInvalidArgument, "ncclCommSplit: config was not set from NCCL_CONFIG_INITIALIZER");
  const CommState& parent = *comm->state;
  MPI_Comm data = MPI_COMM_NULL;
  const int code = MPI_Comm_split(parent.control, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &data);
  if (code != MPI_SUCCESS)
    return fail(ncclSystemError, text("ncclCommSplit: MPI_Comm_split failed: ", mpi_error_text(code)));
  *newcomm = data == MPI_COMM_NULL ? nullptr : new ncclComm{std::make_shared<CommState>(data, parent.device)};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  CommState& state = *comm->state;
  {
    std::unique_lock<std::mutex> lock(state.mutex);
    state.aborted = true;
    state.changed.notify_all();
    // The running operations notice within a poll, abandon their MPI calls and let their streams go on.
    state.changed.wait(lock, [&] { return state.running == 0; });
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr)
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm or asyncError is NULL");
  CommState& state = *comm->state;
  std::lock_guard<std::mutex> lock(state.mutex);
  *async_error = state.async_error;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: comm or count is NULL");
  *count = comm->state->size;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr)
    return fail(ncclInvalidArgument, "ncclCommCuDevice: comm or device is NULL");
  *device = comm->state->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: comm or rank is NULL");
  *rank = comm->state->rank;
  return ncclSuccess;
}
