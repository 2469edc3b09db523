// CUDA driver probe: whether a GPU can be used here, found at run time (the addon never links CUDA).
#pragma once
#include <string>

namespace planc {

struct CudaStatus {
  bool available;
  std::string reason;  // why not, or the driver version and device count
};

// dlopens libcuda.so.1 once and asks it for devices; never fails, only reports.
CudaStatus cuda_status();

}  // namespace planc
