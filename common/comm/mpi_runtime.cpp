// MPI initialisation and finalisation in one place, and MPI error codes turned into lab::Errors.
#include "common/comm/mpi_runtime.h"

#include <exception>

#include "common/comm/mpi_reduce.h"
#include "common/core/error.h"

namespace lab::comm {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return cat("MPI error code ", code);
  return std::string(text, static_cast<size_t>(length));
}

void mpi_check(int code, const char* statement, const char* file, int line) {
  if (code != MPI_SUCCESS)
    fail(ErrorKind::Comm, statement, " failed: ", mpi_error_string(code), " (", file, ":", line, ")");
}

MpiRuntime::MpiRuntime() {
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  LAB_CHECK(!initialized, Comm, "MPI is already initialised: one MpiRuntime (one World) per process");
  int provided = 0;
  MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  // Errors of calls that name no communicator (MPI_Test on a collective's request, for one) are raised on
  // MPI_COMM_WORLD or MPI_COMM_SELF, whose default handler aborts the whole job.
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  LAB_CHECK(provided == MPI_THREAD_MULTIPLE, Comm, "this MPI library provides thread level ", provided,
            ", not MPI_THREAD_MULTIPLE (", MPI_THREAD_MULTIPLE,
            "), which communication overlapped with compute on its own thread needs");
  create_16bit_reduce_ops();
}

MpiRuntime::~MpiRuntime() {
  if (std::uncaught_exceptions() > 0) return;
  free_16bit_reduce_ops();
  MPI_Finalize();
}

}  // namespace lab::comm
