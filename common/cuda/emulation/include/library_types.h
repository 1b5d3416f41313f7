// Stand-in for the CUDA toolkit's library_types.h (LAB_CUDA_EMULATION): the element types of library calls.
#pragma once

typedef enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUDA_R_8I = 3,
  CUDA_R_32I = 10,
  CUDA_R_16BF = 14,
} cudaDataType;
