# cuDNN for the fused flash-attention path (kernels/cuda/attention_cudnn.cu), included
# by the top-level CMakeLists.txt and by tests/gpu/gpu_only.cmake right after the
# zt_cuda target is defined. Looks for cudnn.h (cuDNN 9) and libcudnn in CUDNN_ROOT
# (CMake or environment variable), the CUDA toolkit and ZT_CUDNN_HINT (a prefix with
# include/ and lib/, e.g. the pip wheel's site-packages/nvidia/cudnn; set by
# gpu_only.cmake). Found: attention_cudnn.cu is compiled with ZT_HAVE_CUDNN=1 against
# the vendored cuDNN frontend headers (third_party/cudnn_frontend, C++17), zt_cuda
# links libcudnn and libnvrtc, and libcudnn's directory is put in the build RPATH of
# every target created afterwards (the pip location has no ld.so.conf entry). Not
# found: the file compiles as the "not built" stub. Sets ZT_HAVE_CUDNN, ZT_CUDNN_INCLUDE,
# ZT_CUDNN_LIB.
# -DZT_CUDNN=OFF forces the stub.
option(ZT_CUDNN "Build the cuDNN SDPA attention path when cuDNN is found" ON)
set(ZT_HAVE_CUDNN OFF)
if(NOT ZT_CUDNN)
  message(STATUS "ZT_CUDNN=OFF: the cuDNN SDPA attention path is the \"not built\" stub")
  return()
endif()
find_path(ZT_CUDNN_INCLUDE cudnn.h
          HINTS ${CUDNN_ROOT}/include $ENV{CUDNN_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} ${ZT_CUDNN_HINT}/include)
find_library(ZT_CUDNN_LIB NAMES cudnn libcudnn.so.9
             HINTS ${CUDNN_ROOT}/lib ${CUDNN_ROOT}/lib64 $ENV{CUDNN_ROOT}/lib $ENV{CUDNN_ROOT}/lib64
                   ${CUDAToolkit_LIBRARY_DIR} ${ZT_CUDNN_HINT}/lib)
set(ZT_CUDNN_MAJOR 0)
if(ZT_CUDNN_INCLUDE AND EXISTS ${ZT_CUDNN_INCLUDE}/cudnn_version.h)
  file(STRINGS ${ZT_CUDNN_INCLUDE}/cudnn_version.h ZT_CUDNN_VLINES REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
  foreach(line IN LISTS ZT_CUDNN_VLINES)
    if(line MATCHES "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +([0-9]+)")
      set(ZT_CUDNN_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
    endif()
  endforeach()
endif()
# NVRTC: the frontend's headers reference it (an experimental SM100 RmsNorm engine,
# never used by SDPA), so the link needs it. The toolkit's, else the pip wheel's
# (nvidia/cu13/lib for CUDA 13, nvidia/cuda_nvrtc/lib for CUDA 12).
if(TARGET CUDA::nvrtc)
  set(ZT_NVRTC_LIB CUDA::nvrtc)
else()
  find_library(ZT_NVRTC_LIB NAMES nvrtc libnvrtc.so.13 libnvrtc.so.12
               HINTS ${CUDAToolkit_LIBRARY_DIR} ${ZT_CUDNN_HINT}/../cu13/lib ${ZT_CUDNN_HINT}/../cuda_nvrtc/lib)
endif()
set(ZT_CUDNN_FE_INCLUDE ${CMAKE_SOURCE_DIR}/third_party/cudnn_frontend/include)
if(ZT_CUDNN_INCLUDE AND ZT_CUDNN_LIB AND ZT_CUDNN_MAJOR GREATER_EQUAL 9 AND ZT_NVRTC_LIB
   AND EXISTS ${ZT_CUDNN_FE_INCLUDE}/cudnn_frontend.h)
  set(ZT_HAVE_CUDNN ON)
  get_filename_component(ZT_CUDNN_LIBDIR ${ZT_CUDNN_LIB} DIRECTORY)
  message(STATUS "cuDNN ${ZT_CUDNN_MAJOR}.${ZT_CUDNN_MINOR}.${ZT_CUDNN_PATCHLEVEL}: ${ZT_CUDNN_LIB} "
                 "(${ZT_CUDNN_INCLUDE}); building the cuDNN SDPA attention path (not the default)")
  target_compile_definitions(zt_cuda PRIVATE ZT_HAVE_CUDNN=1)  # read by attention_cudnn.cu only
  # SYSTEM: warnings inside cuDNN's and the frontend's headers are not ours.
  target_include_directories(zt_cuda SYSTEM PRIVATE ${ZT_CUDNN_FE_INCLUDE} ${ZT_CUDNN_INCLUDE})
  set_target_properties(zt_cuda PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_link_libraries(zt_cuda PUBLIC ${ZT_CUDNN_LIB} ${ZT_NVRTC_LIB})
  list(APPEND CMAKE_BUILD_RPATH ${ZT_CUDNN_LIBDIR})
else()
  if(ZT_CUDNN_INCLUDE AND ZT_CUDNN_LIB AND NOT ZT_NVRTC_LIB)
    message(STATUS "cuDNN found but NVRTC (libnvrtc, needed to link the cuDNN frontend) not: "
                   "the cuDNN SDPA attention path is the \"not built\" stub")
  elseif(ZT_CUDNN_INCLUDE AND ZT_CUDNN_LIB AND NOT ZT_CUDNN_MAJOR GREATER_EQUAL 9)
    message(STATUS "cuDNN at ${ZT_CUDNN_INCLUDE} is version ${ZT_CUDNN_MAJOR}, not 9 or newer: "
                   "the cuDNN SDPA attention path is the \"not built\" stub")
  else()
    message(STATUS "cuDNN not found (set CUDNN_ROOT, or install cuDNN 9 into the CUDA toolkit or as the "
                   "nvidia-cudnn pip wheel): the cuDNN SDPA attention path is the \"not built\" stub")
  endif()
endif()
