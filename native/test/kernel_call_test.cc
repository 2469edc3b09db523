// Standalone test of the harness's named kernel arguments (generated/kernel_calls.h over kernel_call::Args): setters
// in any order land at kernel_args.h's positions, enum arguments as their codes, optional arguments may be left off
// the end, a variadic list follows the fixed ones, and a missing or misplaced argument is an error naming it.
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

using namespace test;

namespace {

std::vector<int64_t> iargs;
std::vector<double> fargs;

// The arguments in the kernel's order; the error text, or "" when they resolve.
std::string resolve(const kernel_call::Args& args) {
  const char* err = args.resolve(iargs, fargs);
  return err ? err : "";
}

void test_order() {
  CHECK(resolve(gemm_call().beta(0.5).trans_b(1).alpha(2.0).trans_a(0)).empty());
  CHECK(iargs.size() == size_t(gemm_args::kIargCount) && fargs.size() == size_t(gemm_args::kFargCount));
  CHECK(iargs[gemm_args::kTransA] == 0 && iargs[gemm_args::kTransB] == 1);
  CHECK(fargs[gemm_args::kAlpha] == 2.0 && fargs[gemm_args::kBeta] == 0.5);

  CHECK(resolve(attention_call().scale(0.125).is_causal(1).mask_kind(kMaskBoolKeep).kv_len(7).q_layout(1).num_heads(8)).empty());
  CHECK(iargs.size() == size_t(attention_args::kIargCount) && fargs.size() == size_t(attention_args::kFargCount));
  CHECK(iargs[attention_args::kNumHeads] == 8 && iargs[attention_args::kQLayout] == 1 && iargs[attention_args::kKvLen] == 7);
  CHECK(iargs[attention_args::kMaskKind] == kMaskBoolKeep && iargs[attention_args::kIsCausal] == 1);
  CHECK(fargs[attention_args::kScale] == 0.125);

  CHECK(resolve(qmatmul_call().k(8).n(20).input(kQuantInFloat32).activation(kActGeluTanh)).empty());
  CHECK(iargs[qmatmul_args::kActivation] == kActGeluTanh && iargs[qmatmul_args::kInput] == kQuantInFloat32);
  CHECK(iargs[qmatmul_args::kN] == 20 && iargs[qmatmul_args::kK] == 8);
}

void test_optional_and_variadic() {
  // an optional argument left off the end, or given
  CHECK(resolve(mod_call()).empty() && iargs.empty() && fargs.empty());
  CHECK(resolve(mod_call().fmod(1)).empty() && iargs.size() == 1 && iargs[mod_args::kFmod] == 1);
  // range: the float form only, the integer form only
  CHECK(resolve(range_call().delta(2.0).start(1.0)).empty() && iargs.empty() && fargs.size() == 2);
  CHECK(fargs[range_args::kStart] == 1.0 && fargs[range_args::kDelta] == 2.0);
  CHECK(resolve(range_call().start_int(3).delta_int(1)).empty() && fargs.empty() && iargs.size() == 2);
  CHECK(iargs[range_args::kStartInt] == 3 && iargs[range_args::kDeltaInt] == 1);
  // a variadic list after the fixed arguments; an empty one
  CHECK(resolve(pad_call().pads({1, 2, 3, 4}).mode(kPadEdge)).empty() && iargs.size() == 5);
  CHECK(iargs[pad_args::kMode] == kPadEdge && iargs[pad_args::kPads] == 1 && iargs[pad_args::kPads + 3] == 4);
  CHECK(resolve(transpose_call().perm({})).empty() && iargs.empty());
  CHECK(resolve(transpose_call().perm({2, 0, 1})).empty() && iargs.size() == 3 && iargs[transpose_args::kPerm + 2] == 1);
  // no arguments at all
  CHECK(resolve(kernel_call::Args()).empty() && iargs.empty() && fargs.empty() && kernel_call::Args().kernel() == nullptr);
  CHECK(std::strcmp(softmax_call().kernel(), "softmax") == 0);
}

void test_errors() {
  CHECK_MSG(resolve(gemm_call().trans_a(0).trans_b(0).alpha(1.0)) == "gemm: argument beta is not set", "missing farg: %s",
            resolve(gemm_call().trans_a(0).trans_b(0).alpha(1.0)).c_str());
  CHECK(resolve(softmax_call().axis(1)) == "softmax: argument log is not set");
  CHECK(resolve(pad_call().pads({1, 1})) == "pad: argument mode is not set");
  CHECK(resolve(range_call().delta_int(1)) == "range: optional argument start_int is not set but a later one is");
  CHECK(resolve(range_call().start_int(1).delta(2.0)) == "range: optional argument start is not set but a later one is");
}

}  // namespace

int main() {
  test_order();
  test_optional_and_variadic();
  test_errors();
  return finish("kernel_call_test");
}
