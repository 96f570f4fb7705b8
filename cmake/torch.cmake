# LibTorch 2.x from the PyTorch wheel (pinned in scripts/setup.sh), found with no
# flags: the wheel of $GRPO_PYTHON, else of $GRPO_VENV or the project's .venv
# (scripts/setup.sh installs it there), else of python3 on PATH; -DTorch_DIR=
# overrides them. PyPI's wheel is built with CUDA, and its CMake config needs
# the CUDA toolkit (the build machines have 13.0). Then this is a CUDA build:
# libtorch_cuda is linked, GRPO_WITH_CUDA is defined, the CUDA language is on
# for .cu sources, and the CUDA-only tests compile.

option(GRPO_CUDA "Build our CUDA parts when LibTorch has CUDA" ON)
get_filename_component(_grpo_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
# Searched again whenever the cached folder is gone (a configure that ran
# before scripts/setup.sh cached NOTFOUND).
if(NOT Torch_DIR OR NOT EXISTS "${Torch_DIR}/TorchConfig.cmake")
  set(_grpo_pythons "$ENV{GRPO_PYTHON}")
  if(DEFINED ENV{GRPO_VENV})
    list(APPEND _grpo_pythons "$ENV{GRPO_VENV}/bin/python")
  endif()
  list(APPEND _grpo_pythons "${_grpo_root}/.venv/bin/python")
  find_program(_grpo_system_python NAMES python3 python)
  list(APPEND _grpo_pythons "${_grpo_system_python}")
  foreach(_py IN LISTS _grpo_pythons)
    if(_py AND EXISTS "${_py}")
      execute_process(COMMAND "${_py}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
                      OUTPUT_VARIABLE _grpo_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
                      ERROR_QUIET RESULT_VARIABLE _grpo_rc)
      if(_grpo_rc EQUAL 0 AND EXISTS "${_grpo_torch_prefix}/Torch/TorchConfig.cmake")
        set(Torch_DIR "${_grpo_torch_prefix}/Torch" CACHE PATH "LibTorch's CMake config (the wheel's)" FORCE)
        message(STATUS "LibTorch: the wheel of ${_py}")
        break()
      endif()
    endif()
  endforeach()
endif()

# LibTorch's CUDA config warns about CMAKE_CUDA_ARCHITECTURES and sets it OFF
# (it passes -gencode flags of its own, from TORCH_CUDA_ARCH_LIST): ours are
# kept aside until it is done: at the first configure, the command line's
# -DCMAKE_CUDA_ARCHITECTURES or sm_90 (H100/H200); later, GRPO_CUDA_ARCHITECTURES.
if(NOT DEFINED GRPO_CUDA_ARCHITECTURES)
  set(_grpo_archs 90)
  if(CMAKE_CUDA_ARCHITECTURES AND NOT CMAKE_CUDA_ARCHITECTURES STREQUAL "OFF")
    set(_grpo_archs "${CMAKE_CUDA_ARCHITECTURES}")
  endif()
  set(GRPO_CUDA_ARCHITECTURES "${_grpo_archs}" CACHE STRING "CUDA architectures of our .cu sources")
endif()
unset(CMAKE_CUDA_ARCHITECTURES)
unset(CMAKE_CUDA_ARCHITECTURES CACHE)
if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(ENV{TORCH_CUDA_ARCH_LIST} "9.0")
endif()
find_package(Torch REQUIRED)
# 2.2 keys torch::optim state by pointer (core/trainer/fused_adamw.h) and has
# scaled_dot_product_attention with a scale.
if(Torch_VERSION VERSION_LESS 2.2)
  message(FATAL_ERROR "LibTorch ${Torch_VERSION} at ${Torch_DIR}: grpo needs LibTorch 2.2 or later. "
                      "Run scripts/setup.sh (the pinned torch wheel into .venv), then configure a new "
                      "build folder or pass -DTorch_DIR=<site-packages>/torch/share/cmake/Torch")
endif()
# The benchmarks' peer runs on the Python of the wheel LibTorch came from: a
# virtual environment's, when Torch_DIR lies in one, else python3.
if(NOT GRPO_TORCH_PYTHON)
  get_filename_component(_grpo_env "${Torch_DIR}/../../../../../../.." ABSOLUTE)  # <env>/lib/pythonX.Y/site-packages/torch/share/cmake/Torch
  if(EXISTS "${_grpo_env}/bin/python")
    set(GRPO_TORCH_PYTHON "${_grpo_env}/bin/python")
  else()
    set(GRPO_TORCH_PYTHON python3)
  endif()
endif()
message(STATUS "LibTorch ${Torch_VERSION} at ${Torch_DIR}; the benchmarks' peer runs on ${GRPO_TORCH_PYTHON}")
separate_arguments(GRPO_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")

# The wheel's libtorch.so exports copies of some libstdc++ functions it links
# statically (std::filesystem, <chrono>'s time zones, string streams; PyTorch
# issue 133437), and a program that names libtorch before libstdc++ binds its
# own calls to them: std::filesystem::remove_all then jumps to address 0. The
# real libstdc++ goes first in every C++ program and library of the build, so
# the dynamic linker finds its definitions before LibTorch's.
add_link_options("$<$<LINK_LANGUAGE:CXX>:LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state>")

# One fmt in the whole build. The wheel's include folder carries its own fmt
# (12.x), which would shadow Debian's fmt 9 that spdlog 1.10 is built against:
# LibTorch's targets get an include folder of links to every entry of the
# wheel's except fmt. None of the LibTorch headers our code includes needs fmt.
get_filename_component(_grpo_torch_include "${TORCH_INSTALL_PREFIX}/include" REALPATH)
set(_grpo_filtered "${CMAKE_BINARY_DIR}/torch-include")
file(REMOVE_RECURSE "${_grpo_filtered}")
file(MAKE_DIRECTORY "${_grpo_filtered}")
file(GLOB _grpo_entries RELATIVE "${_grpo_torch_include}" "${_grpo_torch_include}/*")
foreach(_e IN LISTS _grpo_entries)
  if(NOT _e STREQUAL "fmt")
    file(CREATE_LINK "${_grpo_torch_include}/${_e}" "${_grpo_filtered}/${_e}" SYMBOLIC)
  endif()
endforeach()
foreach(_t torch torch_cpu torch_cuda c10 c10_cuda headeronly torch_nvshmem)
  if(TARGET ${_t})
    get_target_property(_dirs ${_t} INTERFACE_INCLUDE_DIRECTORIES)
    if(_dirs)
      set(_new "")
      foreach(_d IN LISTS _dirs)
        get_filename_component(_real "${_d}" REALPATH)
        if(_real STREQUAL _grpo_torch_include)
          list(APPEND _new "${_grpo_filtered}")
        else()
          list(APPEND _new "${_d}")
        endif()
      endforeach()
      list(REMOVE_DUPLICATES _new)
      set_target_properties(${_t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_new}")
    endif()
  endif()
endforeach()

# The check: every include folder that LibTorch's, fmt's and spdlog's targets
# hand our code, searched for fmt's version header; two versions fail here
# rather than as template errors deep inside spdlog.
set(_grpo_fmt_seen "")
foreach(_t torch torch_cpu torch_cuda c10 c10_cuda headeronly fmt::fmt spdlog::spdlog)
  if(TARGET ${_t})
    get_target_property(_dirs ${_t} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT _dirs)
      set(_dirs "")
    endif()
    # Debian's fmt also lives in the compiler's default folder.
    if(_t STREQUAL "fmt::fmt")
      list(APPEND _dirs /usr/include)
    endif()
    foreach(_d IN LISTS _dirs)
      foreach(_h base.h core.h)
        if(EXISTS "${_d}/fmt/${_h}")
          file(STRINGS "${_d}/fmt/${_h}" _v REGEX "^#define FMT_VERSION [0-9]+")
          if(_v)
            string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _v "${_v}")
            list(APPEND _grpo_fmt_seen "${_v}:${_d}")
          endif()
        endif()
      endforeach()
    endforeach()
  endif()
endforeach()
set(_grpo_fmt_versions "")
foreach(_s IN LISTS _grpo_fmt_seen)
  string(REGEX REPLACE ":.*" "" _v "${_s}")
  list(APPEND _grpo_fmt_versions ${_v})
endforeach()
list(REMOVE_DUPLICATES _grpo_fmt_versions)
list(LENGTH _grpo_fmt_versions _n)
if(_n GREATER 1)
  message(FATAL_ERROR "Two fmt versions would meet in one build (FMT_VERSION:folder): ${_grpo_fmt_seen}. "
                      "spdlog and our code must see one fmt; see cmake/torch.cmake")
endif()
if(fmt_VERSION)
  message(STATUS "fmt: ${fmt_VERSION} alone (${_grpo_fmt_seen})")
endif()

# CUDA: the wheel decides. Its CMake config has already found the toolkit
# (it cannot be used without one); nvcc compiles .cu sources for sm_90 unless
# GRPO_CUDA_ARCHITECTURES says otherwise.
set(GRPO_WITH_CUDA OFF)
if(TARGET torch_cuda AND GRPO_CUDA)
  set(GRPO_WITH_CUDA ON)
  set(CMAKE_CUDA_ARCHITECTURES ${GRPO_CUDA_ARCHITECTURES})
  if(NOT CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
    set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
  endif()
  enable_language(CUDA)
  add_compile_definitions(GRPO_WITH_CUDA=1)
  # c10d's NCCL headers include nccl.h: the one of the nvidia-nccl wheel that
  # LibTorch loads, else the toolkit's.
  find_path(GRPO_NCCL_INCLUDE_DIR nccl.h
            HINTS "${TORCH_INSTALL_PREFIX}/../nvidia/nccl/include" ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
  find_path(GRPO_NCCL_INCLUDE_DIR nccl.h)
  if(NOT GRPO_NCCL_INCLUDE_DIR)
    message(FATAL_ERROR "nccl.h not found (the nvidia-nccl wheel beside torch, or the CUDA toolkit's)")
  endif()
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  if(CCACHE_PROGRAM)
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  endif()
  message(STATUS "CUDA build: LibTorch ${Torch_VERSION} with CUDA ${CUDAToolkit_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES}")
elseif(TARGET torch_cuda)
  message(STATUS "GRPO_CUDA is OFF: LibTorch ${Torch_VERSION} is linked with its CUDA libraries, our CUDA parts are left out")
else()
  message(STATUS "CPU build: LibTorch ${Torch_VERSION} has no CUDA")
endif()
