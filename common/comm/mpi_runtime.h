// MPI's lifetime in a process, and how MPI errors become lab::Errors. Built with LAB_WITH_MPI only;
// programs do not use this directly but through World (world.h), which starts MPI only under mpirun.
//
// MPI can be initialised once per process and never again after it is finalised, so one MpiRuntime
// exists at a time. It asks for MPI_THREAD_MULTIPLE because communication overlapped with compute runs on
// its own thread and communicator (see DESIGN.md), and it makes MPI *return* errors instead of aborting
// the job, so that a failure is reported with the rank, operation and sequence number that hit it.
#pragma once

#include <mpi.h>

#include <string>

namespace lab::comm {

// MPI's description of an error code: "MPI_ERR_TRUNCATE: message truncated".
std::string mpi_error_string(int code);

// Throws Error(Comm) naming the MPI call, its error, and file:line when `code` is not MPI_SUCCESS.
void mpi_check(int code, const char* statement, const char* file, int line);

}  // namespace lab::comm

// MPI_CHECK(MPI_Comm_rank(comm, &rank)): the call's error, as an Error(Comm) with the statement text.
#define MPI_CHECK(call) ::lab::comm::mpi_check((call), #call, __FILE__, __LINE__)

namespace lab::comm {

class MpiRuntime {
 public:
  // MPI_Init_thread(MPI_THREAD_MULTIPLE); errors from MPI_COMM_WORLD and MPI_COMM_SELF are returned, not
  // fatal; the reduction operators for 16-bit floats are created. Error(Comm) when MPI is already
  // initialised or cannot give MPI_THREAD_MULTIPLE.
  MpiRuntime();
  // MPI_Finalize, except while an exception is unwinding the stack: MPI_Finalize waits for every other
  // rank, and those may be blocked in a collective that waits for this one, until their timeout. Left
  // unfinalised, this process ends with the error that is propagating, and mpirun ends the others at once.
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
};

}  // namespace lab::comm
