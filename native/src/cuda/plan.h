// A cuda plan's driver state (inside the CUDA executor: launch.cc runs programs on it, resident.cc keeps buffers on it).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "../plan_state.h"
#include "api.h"

namespace planc {

struct CudaPlan {
  const CudaApi* api = nullptr;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  CUmodule module = nullptr;
  CUdeviceptr weights = 0, arena = 0, scratch = 0, err_global = 0;
  size_t max_pitch = 0;  // the device's largest 2D copy pitch (0: no 2D copies)
  std::string device;
  std::shared_ptr<PlanState> shadow;  // weights and arena as device addresses, for program decoding and binding
};

}  // namespace planc
