# Helpers shared by every folder: one way to add a library, a test and a benchmark.

# Aggregates with defaulted trailing members (Stage) are meant to be partly initialised.
# -Werror=switch: a switch over an enum without a default must name every value (Note
# [The semantics of an op kind] in solver/chain/schedule.h).
set(MEMOPT_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror=switch)

# memopt_add_library(NAME memopt_x ALIAS memopt::x SOURCES a.cpp ... PUBLIC_LIBS lib ...)
# A folder's library: sources, the repository root as include path, warnings, alias.
function(memopt_add_library)
  cmake_parse_arguments(L "" "NAME;ALIAS" "SOURCES;PUBLIC_LIBS" ${ARGN})
  add_library(${L_NAME} ${L_SOURCES})
  add_library(${L_ALIAS} ALIAS ${L_NAME})
  target_include_directories(${L_NAME} PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(${L_NAME} PUBLIC ${L_PUBLIC_LIBS})
  target_compile_options(${L_NAME} PRIVATE ${MEMOPT_WARNINGS})
endfunction()

# memopt_add_test(NAME name SOURCES a.cpp ... LIBS lib ...)
# A GoogleTest binary registered with ctest, test by test.
function(memopt_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_options(${T_NAME} PRIVATE ${MEMOPT_WARNINGS})
  target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR})
  target_compile_definitions(${T_NAME} PRIVATE
      MEMOPT_SOURCE_DIR="${CMAKE_SOURCE_DIR}" MEMOPT_BINARY_DIR="${CMAKE_BINARY_DIR}")
  gtest_discover_tests(${T_NAME} DISCOVERY_TIMEOUT 120 PROPERTIES LABELS "${T_LABELS}")
endfunction()

# memopt_add_benchmark(NAME name SOURCES a.cpp ... LIBS lib ...)
function(memopt_add_benchmark)
  cmake_parse_arguments(B "" "NAME" "SOURCES;LIBS" ${ARGN})
  add_executable(${B_NAME} ${B_SOURCES})
  target_link_libraries(${B_NAME} PRIVATE ${B_LIBS} benchmark::benchmark)
  target_include_directories(${B_NAME} PRIVATE ${CMAKE_SOURCE_DIR})
  target_compile_definitions(${B_NAME} PRIVATE MEMOPT_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
endfunction()

# memopt_add_to_cuda_ci(target ...): what CI builds in the `cuda` preset (the
# memopt_cuda_ci target, build preset cuda-ci): the CUDA libraries, the CLI that
# links them with every other library, and the CUDA tests -- so that a CUDA compile
# or link error fails CI, without building the CPU-only tests a second time.
function(memopt_add_to_cuda_ci)
  set_property(GLOBAL APPEND PROPERTY MEMOPT_CUDA_CI_TARGETS ${ARGN})
endfunction()
