// Expression evaluation: Σ coeff × Π sym, every step checked against overflow past 2^62.
#include "expr.h"

namespace planc {

static bool in_limit(int64_t v) { return v >= -kExprLimit && v <= kExprLimit; }

static bool eval_term(const ExprTable& table, const ExprTerm& term, const int64_t* syms, int64_t* out) {
  int64_t p = term.coeff;
  if (!in_limit(p)) return false;
  const uint32_t* f = table.factors.data() + term.factor_begin;
  for (uint32_t i = 0; i < term.n_factors; i++) {
    if (__builtin_mul_overflow(p, syms[f[i]], &p) || !in_limit(p)) return false;
  }
  *out = p;
  return true;
}

bool eval_exprs(const ExprTable& table, const int64_t* syms, int64_t* values, std::string* err) {
  size_t n = table.size();
  for (size_t e = 0; e < n; e++) {
    int64_t sum = 0;
    for (uint32_t t = table.term_begin[e]; t < table.term_begin[e + 1]; t++) {
      int64_t p = 0;
      if (!eval_term(table, table.terms[t], syms, &p) || __builtin_add_overflow(sum, p, &sum) || !in_limit(sum)) {
        *err = "expression #" + std::to_string(e) + " overflows past 2^62 with these symbol values";
        return false;
      }
    }
    values[e] = sum;
  }
  return true;
}

}  // namespace planc
