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
if(NOT EXISTS "${CUDAToolkit_INCLUDE_DIRS}/nvtx3/nvToolsExt.h")
  message(FATAL_ERROR "memopt: NVTX 3 headers not found in ${CUDAToolkit_INCLUDE_DIRS}")
endif()

# The wheel brings its CUDA libraries (nvidia-* packages) without the toolkit's
# unversioned names; LibTorch's config wants the NVRTC it was built with. Point it
# there so FindCUDA's search of the toolkit (which has no NVRTC here) does not leave
# a NOTFOUND in TORCH_LIBRARIES.
execute_process(
  COMMAND "${MEMOPT_PYTHON}" -c
          "import glob, os, nvidia; print(';'.join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], '*', 'lib', 'libnvrtc.so.*')))))"
  OUTPUT_VARIABLE _nvrtc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
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
