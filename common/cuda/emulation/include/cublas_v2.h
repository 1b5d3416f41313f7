// Stand-in for the CUDA toolkit's cublas_v2.h (LAB_CUDA_EMULATION): the handle-based cuBLAS API.
#pragma once

#include "cublas_api.h"
