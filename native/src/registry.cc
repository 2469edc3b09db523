// The kernel table: the nine op-family lists concatenated in a fixed order; a kernel's id is its position here.
#include <vector>

#include "kernel.h"

namespace planc {

KernelList elementwise_kernels();
KernelList unary_kernels();
KernelList cast_kernels();
KernelList reduce_kernels();
KernelList select_kernels();
KernelList gemm_kernels();
KernelList softmax_kernels();
KernelList norm_kernels();
KernelList movement_kernels();
KernelList project_topk_kernels();
KernelList attention_kernels();
KernelList vocab_kernels();
KernelList qgemm_kernels();          // qmatmul (cpu/qgemm.cc)
KernelList qproject_topk_kernels();  // cpu/qproject_topk.cc
KernelList qgather_kernels();        // cpu/qgather.cc
KernelList quantize_rows_kernels();  // cpu/quantize_rows.cc
#ifdef PLANC_TEST_KERNELS
KernelList test_kernels();  // native/test/test_kernels.cc, only in builds configured with -DPLANC_TEST_KERNELS=ON
#endif

static std::vector<KernelDef> build_table() {
  const KernelList lists[] = {
      elementwise_kernels(), unary_kernels(), cast_kernels(),    reduce_kernels(),   select_kernels(),
      gemm_kernels(),        softmax_kernels(), norm_kernels(), movement_kernels(),
      project_topk_kernels(),
      attention_kernels(),
      vocab_kernels(),
      qgemm_kernels(),
      qproject_topk_kernels(),
      qgather_kernels(),
      quantize_rows_kernels(),
#ifdef PLANC_TEST_KERNELS
      test_kernels(),
#endif
  };
  std::vector<KernelDef> table;
  for (const KernelList& list : lists) {
    for (size_t i = 0; i < list.count; i++) table.push_back(list.defs[i]);
  }
  return table;
}

const KernelDef* kernel_table(size_t* count) {
  static const std::vector<KernelDef> table = build_table();
  *count = table.size();
  return table.data();
}

}  // namespace planc
