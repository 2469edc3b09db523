// N-API bindings of the CUDA executor (native/src/cuda/launch.h), added to the addon's exports by addon.cc.
#pragma once
#include <napi.h>

namespace planc {

void register_cuda_bindings(Napi::Env env, Napi::Object exports);

}  // namespace planc
