// cudasimcc IN.cu OUT.cc: writes the source g++ compiles for cudasim (compile.h prepare_source), or says what it
// refuses (exit 1). Used by the emulator's tests to build their kernels.
#include <fstream>
#include <iostream>
#include <sstream>

#include "compile.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: cudasimcc IN.cu OUT.cc\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string out, err;
  if (!in || !cudasim::prepare_source(ss.str(), &out, &err)) {
    std::cerr << (in ? err : std::string("cannot read ") + argv[1]) << "\n";
    return 1;
  }
  std::ofstream(argv[2], std::ios::binary) << out;
  return 0;
}
