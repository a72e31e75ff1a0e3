# Finds LibTorch inside the project's venv (scripts/setup.sh installs the wheel there).
if(NOT EXISTS "${MEMOPT_PYTHON}")
  message(FATAL_ERROR "memopt: no Python at ${MEMOPT_PYTHON}. Run scripts/setup.sh, "
                      "or configure with -DMEMOPT_TORCH=OFF for the solver alone.")
endif()
execute_process(
  COMMAND "${MEMOPT_PYTHON}" -c "import torch; print(torch.utils.cmake_prefix_path)"
  OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _torch_rc ERROR_QUIET)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "memopt: ${MEMOPT_PYTHON} cannot import torch. Run scripts/setup.sh.")
endif()
list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
# Torch's config looks for CUDA when the wheel is a CUDA build; the CPU build does not.
find_package(Torch REQUIRED)
# TORCH_LIBRARIES carries the ABI flag through its interface; nothing else to add.
message(STATUS "memopt: LibTorch ${Torch_VERSION} from ${_torch_prefix}")
