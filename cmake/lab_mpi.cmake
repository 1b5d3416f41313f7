# Multi-process tests: programs that run as real processes under mpirun.
#
#   lab_add_mpi_test(NAME RANKS 2 4 [TIMEOUT s] [LABELS l ...] COMMAND program args...)
#
# registers one CTest test per rank count, NAME.np<N>: `mpiexec -n N --oversubscribe --bind-to none program
# args...`, labelled "mpi" (and LABELS) and reserving N processors, so ctest -j does not run other tests beside
# it. A rank that exits non-zero makes the job's exit status non-zero.
#
#   lab_add_mpi_gtest(NAME SOURCES t.cpp ... [DEPS lib ...] [RANKS 2 4] [TIMEOUT s] [LABELS l ...])
#
# builds NAME with the MPI test main (tests/common/comm/mpi_test_main.cpp: the World, and output from rank 0
# plus every other rank's failures) and registers it as above. Every TEST() of the binary runs in that one
# job: starting mpirun costs about a second. A job whose every test skipped is reported as skipped. Nothing is
# registered without LAB_WITH_MPI or LAB_WITH_TESTS.

# mpirun refuses to start as root unless told twice; CI containers run as root. The ranks of a test share
# few cores: one OpenMP thread per rank, since teams of threads spinning on oversubscribed cores made a
# 4-rank job of 3 s take over 300 s.
set(LAB_MPI_TEST_ENVIRONMENT OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1)

function(lab_add_mpi_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "RANKS;LABELS;COMMAND" ${ARGN})
  if(NOT LAB_WITH_TESTS OR NOT LAB_WITH_MPI)
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  list(POP_FRONT ARG_COMMAND program)
  set(labels mpi ${ARG_LABELS})
  foreach(ranks ${ARG_RANKS})
    add_test(NAME ${name}.np${ranks}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} --oversubscribe --bind-to none
                     ${MPIEXEC_PREFLAGS} ${program} ${MPIEXEC_POSTFLAGS} ${ARG_COMMAND}
             WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
    set(environment ${LAB_MPI_TEST_ENVIRONMENT})
    if(LAB_CUDA_EMULATION)
      # The ranks of a job share one machine, and NCCL wants a GPU of its own for each: one emulated GPU per rank.
      list(APPEND environment LAB_EMU_DEVICES=${ranks})
    endif()
    set_tests_properties(${name}.np${ranks} PROPERTIES
      LABELS "${labels}" TIMEOUT ${ARG_TIMEOUT} PROCESSORS ${ranks} ENVIRONMENT "${environment}")
    if(LAB_SANITIZE MATCHES "address")
      # Open MPI leaks at exit from components it has already unloaded, which leaves LeakSanitizer no
      # symbol to suppress them by: leak checking is off in these processes (every other check stays on).
      set_tests_properties(${name}.np${ranks} PROPERTIES
        ENVIRONMENT_MODIFICATION "ASAN_OPTIONS=path_list_append:detect_leaks=0")
    endif()
  endforeach()
endfunction()

function(lab_add_mpi_gtest name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;RANKS;LABELS" ${ARGN})
  if(NOT LAB_WITH_TESTS OR NOT LAB_WITH_MPI)
    return()
  endif()
  if(NOT ARG_RANKS)
    set(ARG_RANKS 2 4)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} lab_mpi_test_main)
  target_compile_definitions(${name} PRIVATE LAB_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                             LAB_BINARY_DIR="${PROJECT_BINARY_DIR}")
  lab_target_defaults(${name})
  lab_test_compile_options(${name})
  set(labels mpi ${ARG_LABELS})
  lab_test_build_selection(${name} "${labels}")
  lab_add_mpi_test(${name} RANKS ${ARG_RANKS} TIMEOUT ${ARG_TIMEOUT} LABELS ${ARG_LABELS}
                   COMMAND $<TARGET_FILE:${name}>)
  # The test main exits with 77 when every test skipped (no GPU for CUDA tests): skipped, never passed.
  foreach(ranks ${ARG_RANKS})
    set_tests_properties(${name}.np${ranks} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
endfunction()
