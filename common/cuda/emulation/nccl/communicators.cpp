// The stand-in's communicators: the unique id, the bootstrap of ncclCommInitRank over MPI_COMM_WORLD,
// ncclCommSplit, destroy and abort, and the queries.
//
// The bootstrap works as NCCL's does, with MPI messages instead of sockets: the id names a meeting point
// (the MPI_COMM_WORLD rank of the process that made it, and a message tag of its own); every other rank
// tells that process its rank and world rank, and receives from it the table of all members, from which
// each builds the communicator's MPI group (MPI_Comm_create_group is collective over the members only).
#include <atomic>
#include <cstring>
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

// Fills `members` (world ranks, by rank in the new communicator) through the meeting point of `id`.
ncclResult_t exchange_members(const IdContents& id, int rank, std::vector<int>& members) {
  const int nranks = static_cast<int>(members.size());
  const auto mpi_failed = [](int code) {
    return fail(ncclSystemError, text("ncclCommInitRank: the bootstrap failed: ", mpi_error_text(code)));
  };
  if (rank != 0) {
    const int mine[2] = {rank, world_rank()};
    if (const int code = MPI_Send(mine, 2, MPI_INT, id.root, id.tag, MPI_COMM_WORLD); code != MPI_SUCCESS)
      return mpi_failed(code);
    if (const int code = MPI_Recv(members.data(), nranks, MPI_INT, id.root, id.tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        code != MPI_SUCCESS)
      return mpi_failed(code);
    return ncclSuccess;
  }
  if (world_rank() != id.root)
    return fail(ncclInvalidUsage,
                "ncclCommInitRank: rank 0 must be the process that called ncclGetUniqueId (the "
                "stand-in's bootstrap meets there)");
  std::vector<bool> arrived(static_cast<size_t>(nranks), false);
  members[0] = id.root;
  arrived[0] = true;
  for (int i = 1; i < nranks; ++i) {
    int theirs[2] = {0, 0};
    if (const int code = MPI_Recv(theirs, 2, MPI_INT, MPI_ANY_SOURCE, id.tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        code != MPI_SUCCESS)
      return mpi_failed(code);
    if (theirs[0] <= 0 || theirs[0] >= nranks || arrived[static_cast<size_t>(theirs[0])])
      return fail(ncclInvalidUsage, text("ncclCommInitRank: world rank ", theirs[1], " joined as rank ", theirs[0],
                                         ", which is out of range or taken (", nranks, " ranks)"));
    members[static_cast<size_t>(theirs[0])] = theirs[1];
    arrived[static_cast<size_t>(theirs[0])] = true;
  }
  for (int r = 1; r < nranks; ++r)
    if (const int code =
            MPI_Send(members.data(), nranks, MPI_INT, members[static_cast<size_t>(r)], id.tag, MPI_COMM_WORLD);
        code != MPI_SUCCESS)
      return mpi_failed(code);
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
  if (const ncclResult_t exchanged = exchange_members(id, rank, members); exchanged != ncclSuccess) return exchanged;
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
