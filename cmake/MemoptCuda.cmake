# The CUDA backends' toolchain: nvcc (the CUDA language, for kernels/), the toolkit's
# CUPTI and NVTX, and what a CUDA LibTorch's config needs on a machine without a GPU
# driver. Included before MemoptTorch when MEMOPT_CUDA is ON; the CPU build never
# reads this file, so it never needs nvcc.

# nvcc: CMAKE_CUDA_COMPILER or CUDACXX when given, else $CUDA_HOME, else the usual
# install paths. FindCUDA (used by LibTorch's config) finds the same toolkit.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  foreach(_root "$ENV{CUDA_HOME}" /usr/local/cuda-13.0 /usr/local/cuda)
    if(_root AND EXISTS "${_root}/bin/nvcc")
      set(CMAKE_CUDA_COMPILER "${_root}/bin/nvcc" CACHE FILEPATH "nvcc")
      break()
    endif()
  endforeach()
endif()
if(NOT CMAKE_CUDA_ARCHITECTURES)
  # Ampere and Hopper (CUDA 13 dropped Volta); override with -DCMAKE_CUDA_ARCHITECTURES=native on a GPU machine.
  set(CMAKE_CUDA_ARCHITECTURES 80 90 CACHE STRING "GPU architectures memopt's kernels are built for")
endif()
enable_language(CUDA)
# CMake 3.25 knows no C++20 dialect flag for nvcc, and a CUDA target inherits the
# project's CXX_STANDARD 20: without these, configure fails ("CUDA20 ... does not know
# the flags"). nvcc 12+ takes -std=c++20.
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
find_package(CUDAToolkit REQUIRED)
get_filename_component(_cuda_root "${CUDAToolkit_BIN_DIR}" DIRECTORY)
set(CUDA_TOOLKIT_ROOT_DIR "${_cuda_root}" CACHE PATH "the toolkit LibTorch's FindCUDA uses")
if(NOT TARGET CUDA::cupti)
  message(FATAL_ERROR "memopt: CUPTI not found in the CUDA toolkit at ${_cuda_root}; the profiler's CUDA backend "
                      "needs it (install the toolkit's cupti component)")
endif()

# Note [Headers beside a partial toolkit]: a GPU image may carry nvcc and the CUDA
# libraries but not every header: the NVTX 3 and CUPTI headers are then missing from
# the toolkit, while the CUDA torch wheel's nvidia-* packages ship both (in
# nvidia/<pkg>/include). So each is looked for in the toolkit first, then in the wheel's
# packages, then in MEMOPT_DEPS_DIR (scripts/vendor_deps.sh copies NVTX 3 there), and
# the profiler links the interface targets below rather than CUDA::nvtx3 alone.
# The CUDA torch wheel's nvidia-* packages (headers and libraries, below and in the
# NVRTC search further down); empty when the Python has none.
execute_process(
  COMMAND "${MEMOPT_PYTHON}" -c "import nvidia; print(list(nvidia.__path__)[0])"
  OUTPUT_VARIABLE _wheel_nvidia OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(_wheel_includes "")
if(_wheel_nvidia)
  file(GLOB _wheel_includes LIST_DIRECTORIES true "${_wheel_nvidia}/*/include")
  list(SORT _wheel_includes)
endif()
set(_header_dirs ${CUDAToolkit_INCLUDE_DIRS} "${_cuda_root}/extras/CUPTI/include" ${_wheel_includes})
if(MEMOPT_DEPS_DIR)
  list(APPEND _header_dirs "${MEMOPT_DEPS_DIR}/include")
endif()
find_path(MEMOPT_NVTX3_INCLUDE_DIR nvtx3/nvToolsExt.h PATHS ${_header_dirs} NO_DEFAULT_PATH)
find_path(MEMOPT_CUPTI_INCLUDE_DIR cupti.h PATHS ${_header_dirs} NO_DEFAULT_PATH)
if(NOT MEMOPT_NVTX3_INCLUDE_DIR)
  message(FATAL_ERROR "memopt: NVTX 3 headers (nvtx3/nvToolsExt.h) not found in ${_header_dirs}; install the "
                      "toolkit's nvtx component, or run scripts/vendor_deps.sh and pass -DMEMOPT_DEPS_DIR=.deps")
endif()
if(NOT MEMOPT_CUPTI_INCLUDE_DIR)
  message(FATAL_ERROR "memopt: cupti.h not found in ${_header_dirs}; install the toolkit's cupti component")
endif()
add_library(memopt_nvtx3 INTERFACE)
target_include_directories(memopt_nvtx3 SYSTEM INTERFACE "${MEMOPT_NVTX3_INCLUDE_DIR}")
target_link_libraries(memopt_nvtx3 INTERFACE ${CMAKE_DL_LIBS})
add_library(memopt_cupti INTERFACE)
target_include_directories(memopt_cupti SYSTEM INTERFACE "${MEMOPT_CUPTI_INCLUDE_DIR}")
target_link_libraries(memopt_cupti INTERFACE CUDA::cupti)
message(STATUS "memopt: NVTX 3 from ${MEMOPT_NVTX3_INCLUDE_DIR}, CUPTI headers from ${MEMOPT_CUPTI_INCLUDE_DIR}")

# The wheel brings its CUDA libraries (nvidia-* packages) without the toolkit's
# unversioned names; LibTorch's config wants the NVRTC it was built with. Point it
# there so FindCUDA's search of the toolkit (which has no NVRTC here) does not leave
# a NOTFOUND in TORCH_LIBRARIES.
set(_nvrtc "")
if(_wheel_nvidia)
  file(GLOB _nvrtc "${_wheel_nvidia}/*/lib/libnvrtc.so.*")
  list(SORT _nvrtc)
endif()
list(FILTER _nvrtc EXCLUDE REGEX "builtins|alt")
if(_nvrtc)
  list(GET _nvrtc 0 _nvrtc)
  set(CUDA_NVRTC_LIB "${_nvrtc}" CACHE FILEPATH "NVRTC of the CUDA LibTorch wheel")
endif()
# LibTorch's config otherwise compiles and runs a program to ask the GPU for its
# architecture, which fails without one; give it ours.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST)
  set(_arch_list "")
  foreach(_a ${CMAKE_CUDA_ARCHITECTURES})
    string(REGEX REPLACE "^([0-9]+)([0-9])$" "\\1.\\2" _a "${_a}")
    list(APPEND _arch_list "${_a}")
  endforeach()
  set(TORCH_CUDA_ARCH_LIST "${_arch_list}" CACHE STRING "LibTorch's name for CMAKE_CUDA_ARCHITECTURES")
endif()
message(STATUS "memopt: CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER}), architectures ${CMAKE_CUDA_ARCHITECTURES}")
