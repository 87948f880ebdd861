#include "core/ops/op_util.h"

#include "core/util/checked.h"

#include <algorithm>

namespace basin::ops {

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

int64_t Check::at_least(const Attrs& a, const std::string& name, int64_t min) const {
  int64_t v = a.i(name);
  that(v >= min, name, "must be at least " + std::to_string(min) + ", got " + std::to_string(v));
  return v;
}

std::vector<int64_t> Check::shape(const Attrs& a, const std::string& name, size_t min_rank) const {
  const std::vector<int64_t>& s = a.ints(name);
  that(s.size() >= min_rank, name, "needs at least " + std::to_string(min_rank) + " dimensions, got " + ints_str(s));
  for (int64_t d : s) that(d > 0, name, "extents must be positive, got " + ints_str(s));
  return s;
}

std::vector<int64_t> Check::per_dim(const Attrs& a, const std::string& name, size_t rank, int64_t min) const {
  std::vector<int64_t> v = a.ints(name);
  if (v.size() == 1 && rank > 1) v.assign(rank, v[0]);
  that(v.size() == rank, name, "needs 1 or " + std::to_string(rank) + " values, got " + ints_str(a.ints(name)));
  for (int64_t x : v)
    that(x >= min, name, "values must be at least " + std::to_string(min) + ", got " + ints_str(a.ints(name)));
  return v;
}

int Check::axis(int64_t axis, int rank, const std::string& name) const {
  that(axis >= -rank && axis < rank, name,
       "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::vector<int> Check::axes(const std::vector<int64_t>& axes, int rank, const std::string& name) const {
  std::vector<int> r;
  for (int64_t a : axes) r.push_back(axis(a, rank, name));
  std::sort(r.begin(), r.end());
  that(std::adjacent_find(r.begin(), r.end()) == r.end(), name, "repeated axis in " + ints_str(axes));
  return r;
}

std::vector<int64_t> broadcast_shapes(const Check& c, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    c.that(x == y || x == 1 || y == 1, "shape", "shapes " + ints_str(a) + " and " + ints_str(b) + " do not broadcast");
    out[i] = std::max(x, y);
  }
  return out;
}

std::vector<Expr> broadcast_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                                  const std::vector<Var>& out_idx) {
  std::vector<Expr> idx;
  size_t off = out_idx.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    idx.push_back(in[i] == 1 && out[off + i] != 1 ? Expr(0) : Expr(out_idx[off + i]));
  return idx;
}

// A shape's element count; one past 2^63 - 1 is an error, never a wrapped count.
int64_t product(const std::vector<int64_t>& v) { return checked_product(v); }

std::vector<Expr> as_exprs(const std::vector<Var>& v) { return {v.begin(), v.end()}; }

}  // namespace basin::ops
