# CONVBANK_ENABLE_CUDA=AUTO|ON|OFF -> CONVBANK_WITH_CUDA, and the CUDA language when enabled.
set(CONVBANK_WITH_CUDA OFF)
if(NOT CONVBANK_ENABLE_CUDA STREQUAL "OFF")
  # nvcc is often installed off PATH (Debian images, CI); look in the toolkit's usual home.
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Ampere, Ada and Hopper users get native code (sm_90 for the H100/H200), plus PTX for
    # newer GPUs through the last entry's compute_90.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80-real 86-real 89-real 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CONVBANK_WITH_CUDA ON)
  elseif(CONVBANK_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "CONVBANK_ENABLE_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()
