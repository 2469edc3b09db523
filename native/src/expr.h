// Dimension expressions: polynomials over runtime symbols with int64 coefficients, evaluated with overflow checks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace planc {

constexpr int64_t kExprLimit = int64_t(1) << 62;  // |value| and every partial product/sum must stay within this

struct ExprTerm {
  int64_t coeff;
  uint32_t factor_begin;  // into ExprTable::factors
  uint32_t n_factors;
};

// All expressions of a program, flat: expression e's terms are terms[term_begin[e] .. term_begin[e + 1]).
struct ExprTable {
  std::vector<uint32_t> term_begin;  // n_exprs + 1 entries
  std::vector<ExprTerm> terms;
  std::vector<uint32_t> factors;     // symbol indices, checked < n_syms when decoded
  size_t size() const { return term_begin.empty() ? 0 : term_begin.size() - 1; }
};

// Evaluates every expression into values (sized size()); false with *err naming the expression on overflow.
bool eval_exprs(const ExprTable& table, const int64_t* syms, int64_t* values, std::string* err);

}  // namespace planc
