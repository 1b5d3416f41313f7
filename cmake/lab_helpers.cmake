# Helpers every chapter uses: one place for warnings, sanitizers, OpenMP and the CUDA flags.

# Flags for the project's own code (never for third-party targets). Warnings are errors only with LAB_WERROR
# (scripts/test.sh turns it on): a compiler newer than the one CI uses may warn where CI's does not, and that
# must not stop a user's build.
function(lab_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unknown-pragmas>
    # Nothing here reads errno after a math call or tests floating-point exception flags; without these,
    # loops calling sqrt() or floor() are not vectorised (both are still IEEE-exact).
    $<$<COMPILE_LANGUAGE:CXX>:-fno-math-errno -fno-trapping-math>
    # `#pragma omp simd` asks for a vectorised loop. Where clang 16 cannot give one (a max reduction written as a
    # comparison, the CPU ops' loops over fp16 and some over bf16, whose conversions are in common/core/dtype.h)
    # the loop stays scalar under clang and it warns ("loop not vectorized", -Wpass-failed), where GCC says
    # nothing. The loop is still correct: a missed speed-up of the CPU reference, not a warning that stops a build.
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:Clang>>:-Wno-pass-failed>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr>)
  if(LAB_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                             $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>)
  endif()
  if(LAB_NATIVE_ARCH)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
  endif()
  if(LAB_SANITIZE)
    # GCC 12's -Wmaybe-uninitialized misfires inside libstdc++ (std::regex, std::function) once the
    # sanitizers' instrumentation is in: keep it a warning there, the sanitizers check the real thing.
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${LAB_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all
                                -Wno-error=maybe-uninitialized>)
    target_link_options(${target} PRIVATE -fsanitize=${LAB_SANITIZE})
    if(LAB_SANITIZE_SKIP)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize=${LAB_SANITIZE_SKIP}>)
    endif()
  endif()
endfunction()

# lab_target_cuda_sources(TARGET k.cu ...): adds CUDA sources to a target (callers check LAB_WITH_CUDA). In the
# emulation build (LAB_CUDA_EMULATION) they are compiled as C++ by the host compiler (CMake passes -x c++).
function(lab_target_cuda_sources target)
  target_sources(${target} PRIVATE ${ARGN})
  if(LAB_CUDA_EMULATION)
    # Source properties belong to a directory: set them where the target lives, not only here.
    set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CXX)
  endif()
endfunction()

# lab_target_sm90a(TARGET DEFINE): a target that uses wgmma (an sm_90a instruction) builds for sm_90a where the build
# targets sm_90 (90 in CMAKE_CUDA_ARCHITECTURES becomes 90a for it; its code then runs on compute capability 9.0
# GPUs only, as 90's does), and gets DEFINE to say so; other architectures in the list stay as they are.
function(lab_target_sm90a target define)
  set(archs ${CMAKE_CUDA_ARCHITECTURES})
  if("90" IN_LIST archs)
    list(TRANSFORM archs REPLACE "^90$" "90a")
    set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${archs}")
    target_compile_definitions(${target} PRIVATE ${define})
  endif()
endfunction()

# lab_add_library(NAME SOURCES a.cpp ... [CUDA_SOURCES k.cu ...] [DEPS lib ...])
# CUDA_SOURCES are compiled only when LAB_WITH_CUDA is ON.
function(lab_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;CUDA_SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  if(LAB_WITH_CUDA AND ARG_CUDA_SOURCES)
    lab_target_cuda_sources(${name} ${ARG_CUDA_SOURCES})
  endif()
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  lab_target_defaults(${name})
  if(LAB_WITH_CUDA AND NOT LAB_CUDA_EMULATION)
    set_target_properties(${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF POSITION_INDEPENDENT_CODE ON)
  endif()
endfunction()

# lab_add_executable(NAME SOURCES main.cpp ... [DEPS lib ...]): built into build/bin/.
function(lab_add_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  lab_target_defaults(${name})
endfunction()

# The options of LAB_TEST_COMPILE_OPTIONS for a test program's own sources; they come after the build type's
# flags, so an -O level there wins. scripts/test.sh compiles the tests at -O0 (it says why), while the code under
# test keeps the build's -O2.
function(lab_test_compile_options target)
  if(LAB_TEST_COMPILE_OPTIONS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${LAB_TEST_COMPILE_OPTIONS}>)
  endif()
endfunction()

# With LAB_BUILD_TESTS_WITH_LABELS set, a test program none of whose labels is in that list is left out of the
# default build (`cmake --build --target NAME` still builds it); its tests show as NAME_NOT_BUILT, unlabelled, so
# that `ctest -L` with the same labels passes them by. scripts/test.sh uses it in the plain build, which runs only
# the tests labelled cuda or plain_build (the emulation build runs them all): the others' programs would be
# compiled for nothing.
function(lab_test_build_selection target labels)
  if(NOT LAB_BUILD_TESTS_WITH_LABELS)
    return()
  endif()
  foreach(label IN LISTS labels)
    if(label IN_LIST LAB_BUILD_TESTS_WITH_LABELS)
      return()
    endif()
  endforeach()
  set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL TRUE)
endfunction()

# lab_add_gtest(NAME SOURCES t.cpp ... [DEPS lib ...] [LABELS l ...] [ENVIRONMENT VAR=value ...] [TIMEOUT s]
#               [NO_LEAK_CHECK])
# A test's own TIMEOUT overrides `ctest --timeout`, so the default one is a cache variable: LAB_TEST_TIMEOUT
# (600 s; scripts/gpu_check.sh sets its --test-timeout there).
# Each TEST() becomes one CTest test; a GTEST_SKIP() shows as "skipped", never as passed. In the emulation
# build every test sees two emulated GPUs (LAB_EMU_DEVICES=2; the emulator's default is one), so that the
# tests of two-GPU code run too. NO_LEAK_CHECK turns LeakSanitizer off for the tests of a binary whose leaks
# are by design (say why where it is used); AddressSanitizer's other checks stay on.
set(LAB_TEST_TIMEOUT 600 CACHE STRING "Seconds a GoogleTest test may run unless it names its own TIMEOUT")

function(lab_add_gtest name)
  cmake_parse_arguments(ARG "NO_LEAK_CHECK" "TIMEOUT" "SOURCES;DEPS;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT LAB_WITH_TESTS)
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT ${LAB_TEST_TIMEOUT})
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE LAB_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                             LAB_BINARY_DIR="${PROJECT_BINARY_DIR}")
  lab_target_defaults(${name})
  lab_test_compile_options(${name})
  lab_test_build_selection(${name} "${ARG_LABELS}")
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  # Labels and environment are set once CTest knows the tests: passed through PROPERTIES above, a list
  # would lose its semicolons on the way (and an empty one would shift the pairs after it).
  set(environment ${ARG_ENVIRONMENT})
  if(LAB_CUDA_EMULATION)
    list(APPEND environment LAB_EMU_DEVICES=2)
  endif()
  set(properties "")
  if(ARG_LABELS)
    string(APPEND properties " LABELS \"${ARG_LABELS}\"")
  endif()
  if(environment)
    string(APPEND properties " ENVIRONMENT \"${environment}\"")
  endif()
  if(ARG_NO_LEAK_CHECK AND LAB_SANITIZE MATCHES "address")
    string(APPEND properties " ENVIRONMENT_MODIFICATION \"ASAN_OPTIONS=path_list_append:detect_leaks=0\"")
  endif()
  if(properties)
    set(script "${CMAKE_CURRENT_BINARY_DIR}/${name}_properties.cmake")
    file(WRITE "${script}" "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES${properties})\nendif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${script}")
  endif()
endfunction()
