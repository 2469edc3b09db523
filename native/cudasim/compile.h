// Turns CUDA source into a CPU module: checks for constructs cudasim cannot model, rewrites dynamic shared memory,
// compiles with g++ against cudasim.h into a shared object cached by the hash of its source and the emulator headers.
#pragma once
#include <string>

namespace cudasim {

// The source as g++ compiles it (extern __shared__ arrays become pointers to the launch's dynamic shared memory).
// False with *err naming the first construct the emulator cannot model and its line.
bool prepare_source(const std::string& cu, std::string* out, std::string* err);

// Builds (or finds in the cache) the module of a .cu; *so is its path. False with *err (a refusal or g++'s errors).
bool build_module(const std::string& cu, std::string* so, std::string* err);

// The folder holding cudasim.h (PLANC_CUDASIM_DIR, else where this file was built from).
std::string emulator_dir();

}  // namespace cudasim
