# The cuDNN packed-document table (kernels/cuda/cudnn_docs.c, pure host C): a CPU test, built
# with or without CUDA (the file is compiled in directly).
zt_add_test(test_cudnn_docs ${ZT_TEST_DIR}/unit/test_cudnn_docs.c zt_data zt_base)
target_sources(test_cudnn_docs PRIVATE ${CMAKE_SOURCE_DIR}/kernels/cuda/cudnn_docs.c)
