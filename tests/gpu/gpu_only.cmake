# ZT_GPU_ONLY=ON (included from the top-level CMakeLists.txt, which returns right
# after): the build for a GPU machine that has nvcc, cmake and ninja but no MPI,
# HDF5, OpenBLAS or cJSON. It builds zt_base, the CPU reference kernels (which need no
# BLAS: their products are kernels/cpu/gemm.c), zt_cuda
# and the tests/gpu programs. Nothing else of zerotrain is configured.
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR "ZT_GPU_ONLY=ON needs nvcc (CUDA toolkit) on the PATH or CMAKE_CUDA_COMPILER")
endif()
set(ZT_CUDA ON)
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
# A toolkit without cuBLAS: fall back to the cuBLAS wheel that PyTorch installs
# (CUDA 13 wheels: nvidia/cu13/{include,lib}; CUDA 12: nvidia/cublas/{include,lib}).
if(NOT TARGET CUDA::cublasLt)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c
                    "import importlib\nfor n in ('nvidia.cu13', 'nvidia.cublas'):\n try:\n  print(list(importlib.import_module(n).__path__)[0]); break\n except Exception: pass"
                    OUTPUT_VARIABLE ZT_PIP_CUBLAS OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  find_path(ZT_CUBLASLT_INC cublasLt.h HINTS ${ZT_PIP_CUBLAS}/include)
  find_library(ZT_CUBLASLT_LIB NAMES cublasLt libcublasLt.so.13 libcublasLt.so.12 HINTS ${ZT_PIP_CUBLAS}/lib)
  if(NOT ZT_CUBLASLT_INC OR NOT ZT_CUBLASLT_LIB)
    message(FATAL_ERROR "cuBLASLt not found in the CUDA toolkit nor in a pip nvidia-cublas package")
  endif()
  message(STATUS "cuBLASLt from ${ZT_CUBLASLT_LIB}")
  add_library(CUDA::cublasLt SHARED IMPORTED)
  set_target_properties(CUDA::cublasLt PROPERTIES IMPORTED_LOCATION ${ZT_CUBLASLT_LIB}
                        INTERFACE_INCLUDE_DIRECTORIES ${ZT_CUBLASLT_INC})
endif()
find_package(Threads REQUIRED)
find_package(OpenMP COMPONENTS C)  # optional: the naive CPU reference is just slower without it

include_directories(${CMAKE_SOURCE_DIR})

add_library(zt_base STATIC ${CMAKE_SOURCE_DIR}/base/common.c ${CMAKE_SOURCE_DIR}/base/out_file.c
            ${CMAKE_SOURCE_DIR}/base/env.c)
target_link_libraries(zt_base PUBLIC m Threads::Threads)

# The CPU reference ops (the GPU tests' oracle).
file(GLOB ZT_KERNEL_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cpu/*.c)
list(APPEND ZT_KERNEL_SRC ${CMAKE_SOURCE_DIR}/kernels/cuda/attention/policy.c)  # as CMakeLists.txt
add_library(zt_kernels STATIC ${ZT_KERNEL_SRC})
target_compile_options(zt_kernels PRIVATE -O3 -fno-math-errno -ffp-contract=off)
target_link_libraries(zt_kernels PUBLIC zt_base)
if(OpenMP_C_FOUND)
  target_link_libraries(zt_kernels PUBLIC OpenMP::OpenMP_C)
else()
  target_compile_options(zt_kernels PRIVATE -Wno-unknown-pragmas)
endif()

file(GLOB ZT_CUDA_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cu ${CMAKE_SOURCE_DIR}/kernels/cuda/*.c)
list(APPEND ZT_CUDA_SRC ${CMAKE_SOURCE_DIR}/kernels/cuda/attention/dispatch.c)
add_library(zt_cuda STATIC ${ZT_CUDA_SRC})
target_link_libraries(zt_cuda PUBLIC zt_base CUDA::cudart_static CUDA::cublasLt)

# cuDNN (optional: the fused flash-attention path): CUDNN_ROOT, the toolkit, or the
# wheel PyTorch installs (nvidia-cudnn-cu13/-cu12: site-packages/nvidia/cudnn/{include,lib},
# libcudnn.so.9 only). Not found: attention_cudnn.cu is its "not built" stub.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c
                  "import importlib\ntry:\n print(list(importlib.import_module('nvidia.cudnn').__path__)[0])\nexcept Exception: pass"
                  OUTPUT_VARIABLE ZT_CUDNN_HINT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
include(${CMAKE_SOURCE_DIR}/kernels/cuda/cudnn.cmake)

# NCCL (optional here): the toolkit's, NCCL_ROOT, or the wheel PyTorch installs
# (nvidia/nccl/{include,lib}). With it the NCCL comm test and the GPU FSDP engine test
# are built too (world 1, no MPI).
if(Python3_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c
                  "import importlib\nfor n in ('nvidia.nccl', 'nvidia.cu13'):\n try:\n  print(list(importlib.import_module(n).__path__)[0]); break\n except Exception: pass"
                  OUTPUT_VARIABLE ZT_PIP_NCCL OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
find_path(ZT_NCCL_INCLUDE nccl.h HINTS ${NCCL_ROOT}/include $ENV{NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS}
          ${ZT_PIP_NCCL}/include)
find_library(ZT_NCCL_LIB NAMES nccl libnccl.so.2
             HINTS ${NCCL_ROOT}/lib $ENV{NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} ${ZT_PIP_NCCL}/lib)
if(ZT_NCCL_INCLUDE AND ZT_NCCL_LIB)
  set(ZT_HAVE_NCCL ON)
  message(STATUS "NCCL: ${ZT_NCCL_LIB} (${ZT_NCCL_INCLUDE})")
else()
  message(STATUS "NCCL not found: the NCCL comm and GPU FSDP engine tests are not built")
endif()

enable_testing()
include(${CMAKE_SOURCE_DIR}/tests/gpu.cmake)
include(${CMAKE_SOURCE_DIR}/tests/comm_nccl.cmake)
