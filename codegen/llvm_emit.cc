// Loop IR to LLVM IR. Loops become header/body/latch blocks with a phi for the
// induction variable; Select and short-circuit logic whose operands could fault
// (loads, integer division) become branches, as the IR's lazy semantics require;
// under the pragma kGuardedLoadsInBounds (core/ir/version_tiles.h) a Select's loads run
// whatever its condition, and it selects after.
//
// Loop kinds: an unrolled loop with a constant extent is emitted once per iteration; a
// vectorized loop with a constant extent L is emitted once, its variable an L-lane
// vector: values that depend on it are vectors, loads and stores with a unit stride in
// it become vector loads and stores, other constant strides one scalar load (store) per
// lane put into (taken from) the vector (strides 2 to 4: vector loads and a shuffle),
// other indices gathers and scatters, and loads and stores under a lane-varying
// condition (a Select, a short-circuit operand, an IfThenElse such as a guarded last
// tile) are masked so that no disabled lane touches memory; a Select whose condition
// is the same for every lane is a branch between whole vectors. A parallel loop is
// outlined into a function over a chunk of its range and handed to the runtime thread
// pool (cpu_runtime.h) with its captured values in a context array; the outlined body
// takes its buffers as noalias arguments, as the kernel body does.
#include "codegen/llvm_emit.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/PatternMatch.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/expr/analyzer.h"
#include "core/ir/version_tiles.h"
#include "core/util/error.h"
#include "core/util/host.h"

namespace basin::codegen {

namespace {

// True if evaluating e could fault (a load, or an integer division by a non-constant).
// `loads_in_bounds`: under the pragma kGuardedLoadsInBounds, loads read inside their
// buffers whatever guards them.
bool may_fault(const Expr& e, bool loads_in_bounds = false) {
  bool fault = false;
  post_order_visit(e, [&](const Expr& x) {
    if (x.kind() == ExprKind::Load && !loads_in_bounds) fault = true;
    if ((x.kind() == ExprKind::Div || x.kind() == ExprKind::FloorDiv || x.kind() == ExprKind::FloorMod) &&
        x.dtype().is_int() && !is_const(x.arg(1)))
      fault = true;
  });
  return fault;
}

class Emitter {
 public:
  Emitter(llvm::LLVMContext& ctx, llvm::Module& mod, const LlvmOptions& opt)
      : ctx_(ctx),
        mod_(mod),
        b_(ctx),
        bf16_dot_(this_host().bf16_dot),
        amx_bf16_(this_host().amx_bf16 && opt.amx_tiles),
        amx_int8_(this_host().amx_int8 && opt.amx_tiles),
        int8_dot_(this_host().int8_dot && !opt.int8_without_vnni ? vector_file(this_host().vector_isa).bytes / 4 : 0),
        int8_madd_(this_host().vector_isa == "avx512" ? 16
                   : this_host().vector_isa == "avx2" ? 8
                                                      : 0) {
    if (opt.contract_fma) {
      llvm::FastMathFlags fmf;
      fmf.setAllowContract(true);
      b_.setFastMathFlags(fmf);
    }
  }

  void emit(const LoweredFunc& f, const std::string& entry) {
    llvm::Type* ptr = llvm::PointerType::get(ctx_, 0);
    std::vector<llvm::Type*> arg_types(f.params.size(), ptr);
    auto* body_ty = llvm::FunctionType::get(b_.getVoidTy(), arg_types, false);
    fn_ = llvm::Function::Create(body_ty, llvm::Function::InternalLinkage, entry + "_body", mod_);
    fn_->addFnAttr(llvm::Attribute::AlwaysInline);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    for (size_t i = 0; i < f.params.size(); ++i) {
      fn_->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoAlias);
      fn_->getArg(static_cast<unsigned>(i))->setName(f.params[i]->name);
      bufs_[f.params[i].get()] = fn_->getArg(static_cast<unsigned>(i));
    }
    entry_block_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry_block_);
    stmt(f.body);
    b_.CreateRetVoid();

    // The entry point: unpacks the argument array.
    auto* entry_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr}, false);
    llvm::Function* outer = llvm::Function::Create(entry_ty, llvm::Function::ExternalLinkage, entry, mod_);
    outer->addFnAttr(llvm::Attribute::NoUnwind);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", outer));
    std::vector<llvm::Value*> args;
    for (size_t i = 0; i < f.params.size(); ++i) {
      llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(ptr, outer->getArg(0), i);
      args.push_back(b_.CreateLoad(ptr, slot, f.params[i]->name + "_ptr"));
    }
    b_.CreateCall(fn_, args);
    b_.CreateRetVoid();
  }

 private:
  llvm::Type* reg_type(DType t) {
    BASIN_CHECK(t.is_scalar()) << "vector dtypes are not used in loop IR";
    if (t.is_bool()) return b_.getInt1Ty();
    if (t.is_float()) return t.bits == 32 ? b_.getFloatTy() : b_.getDoubleTy();
    return b_.getIntNTy(t.bits);
  }
  llvm::Type* mem_type(DType t) { return t.is_bool() ? b_.getInt8Ty() : reg_type(t); }
  // The register type of t, as a vector when `like` is one.
  llvm::Type* type_like(DType t, llvm::Value* like) {
    llvm::Type* ty = reg_type(t);
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like->getType()))
      return llvm::FixedVectorType::get(ty, vt->getNumElements());
    return ty;
  }
  static bool is_vector(llvm::Value* v) { return v->getType()->isVectorTy(); }
  llvm::Value* splat(llvm::Value* v) {
    return is_vector(v) ? v : b_.CreateVectorSplat(static_cast<unsigned>(vec_->lanes), v);
  }
  // Makes both operands vectors if either is.
  void unify(llvm::Value*& x, llvm::Value*& y) {
    if (is_vector(x) != is_vector(y)) {
      x = splat(x);
      y = splat(y);
    }
  }
  llvm::Value* all_lanes() {
    return llvm::ConstantInt::getTrue(llvm::FixedVectorType::get(b_.getInt1Ty(), vec_->lanes));
  }

  llvm::Value* index64(const Expr& e) {
    llvm::Value* v = expr(e);
    llvm::Type* i64 = b_.getInt64Ty();
    if (is_vector(v)) {
      auto* vt = llvm::cast<llvm::FixedVectorType>(v->getType());
      i64 = llvm::FixedVectorType::get(i64, vt->getNumElements());
    }
    return v->getType() == i64 ? v : b_.CreateSExt(v, i64);
  }
  llvm::Value* scalar_index64(const Expr& e, const char* what) {
    llvm::Value* v = index64(e);
    if (is_vector(v))
      throw InternalError(std::string(what) + " varies across the lanes of a vectorized loop: " + to_string(e));
    return v;
  }

  // ---- addresses ----
  // An index is emitted from its linear form: the terms whose variable is bound to a
  // constant (unrolled iterations) fold into a constant offset, the rest form a base
  // that is computed once per straight-line region and shared by every unrolled step
  // (addr_cache_, saved and restored around control flow so that a cached value always
  // dominates its uses). The vectorized loop's variable is kept apart: its coefficient
  // says whether an access is scalar (0), contiguous (1) or a gather.
  const LinearForm& linear(const Expr& flat) {
    auto it = linear_memo_.find(flat.get());
    if (it == linear_memo_.end())
      it = linear_memo_.emplace(flat.get(), std::make_pair(flat, Analyzer().linear_form(flat))).first;
    return it->second.second;
  }

  struct Affine {
    llvm::Value* base = nullptr;  // i64, null for none
    int64_t offset = 0;
    int64_t vec_coef = 0;       // coefficient of the vectorized loop's variable
    bool affine_in_vec = true;  // false: the variable also sits inside a non-linear term
  };

  Affine affine(const Expr& flat) {
    const LinearForm& lf = linear(flat);
    Affine a;
    a.offset = lf.constant;
    std::vector<uintptr_t> key;
    std::vector<std::pair<const Expr*, int64_t>> dynamic;
    for (const auto& [atom, coef] : lf.terms) {
      if (atom.kind() == ExprKind::Var) {
        int64_t id = Var(atom).id();
        if (vec_ && id == vec_->var.id()) {
          a.vec_coef += coef;
          continue;
        }
        llvm::Value* v = vars_.at(id);
        if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(v)) {
          a.offset += coef * c->getSExtValue();
          continue;
        }
        key.insert(key.end(), {reinterpret_cast<uintptr_t>(atom.get()), static_cast<uintptr_t>(coef),
                               reinterpret_cast<uintptr_t>(v)});
      } else {
        if (vec_ && uses_var(atom, vec_->var)) {
          a.affine_in_vec = false;
          return a;
        }
        key.insert(key.end(), {reinterpret_cast<uintptr_t>(atom.get()), static_cast<uintptr_t>(coef)});
        post_order_visit(atom, [&](const Expr& x) {
          if (x.kind() == ExprKind::Var) key.push_back(reinterpret_cast<uintptr_t>(vars_.at(Var(x).id())));
        });
      }
      dynamic.push_back({&atom, coef});
    }
    if (dynamic.empty()) return a;
    auto hit = addr_cache_.find(key);
    if (hit != addr_cache_.end()) {
      a.base = hit->second;
      return a;
    }
    llvm::Value* sum = nullptr;
    for (const auto& [atom, coef] : dynamic) {
      llvm::Value* t = index64(*atom);
      if (coef != 1) t = b_.CreateMul(t, b_.getInt64(coef));
      sum = sum ? b_.CreateAdd(sum, t) : t;
    }
    addr_cache_[key] = sum;
    a.base = sum;
    return a;
  }

  llvm::Value* element_ptr(const Buffer& buf, llvm::Value* base, int64_t offset) {
    llvm::Type* elem = mem_type(buf->dtype);
    llvm::Value* p = buffer_ptr(buf);
    if (base) p = b_.CreateInBoundsGEP(elem, p, base);
    return offset ? b_.CreateInBoundsGEP(elem, p, b_.getInt64(offset)) : p;
  }

  llvm::Value* buffer_ptr(const Buffer& buf) {
    auto it = bufs_.find(buf.get());
    BASIN_CHECK(it != bufs_.end()) << "buffer " << buf->name << " is neither a parameter nor allocated";
    return it->second;
  }
  // The address of a scalar access.
  llvm::Value* address(const Buffer& buf, const std::vector<Expr>& idx) {
    Affine a = affine(flat_expr(buf, idx));
    return element_ptr(buf, a.base, a.offset);
  }
  Expr flat_expr(const Buffer& buf, const std::vector<Expr>& idx) {
    if (idx.empty()) return Expr(int64_t{0});
    if (idx.size() == 1) return idx[0];
    Expr flat = idx[0];
    for (size_t i = 1; i < idx.size(); ++i) flat = flat * buf->shape[i] + idx[i];
    return flat;
  }

  // How an access inside a vectorized loop touches memory. A constant stride other than
  // one is a load or store per lane: on Zen 4 LLVM's gathers (64-bit addresses, 8 lanes
  // an instruction) made a convolution whose weights the vector loop reads 2304
  // elements apart twice as slow, and a weight-packing loop read that way 1.3 times
  // (docs/PERFORMANCE.md@6bf7154, "Strided loads"). An index that is not affine in the
  // lane keeps the gather or scatter, and so does a mask, except on a load of a small
  // stride (masked loads, then a shuffle: strided_by_shuffle).
  enum class Access { Scalar, Contiguous, Strided, Gather };
  Access classify(const Affine& a, bool load) {
    if (!a.affine_in_vec) return Access::Gather;
    if (a.vec_coef == 0) return Access::Scalar;
    if (a.vec_coef == 1) return Access::Contiguous;
    if (!mask_) return Access::Strided;
    return load && a.vec_coef >= 2 && a.vec_coef <= kShuffledStride ? Access::Strided : Access::Gather;
  }

  // The address of lane 0 of an access affine in the vectorized loop's variable.
  llvm::Value* lane0_ptr(const Buffer& buf, const Affine& a) {
    llvm::Type* elem = mem_type(buf->dtype);
    llvm::Value* first = a.vec_coef == 1 ? vec_->lo : b_.CreateMul(vec_->lo, b_.getInt64(a.vec_coef));
    return b_.CreateInBoundsGEP(elem, element_ptr(buf, a.base, a.offset), first);
  }

  // Lanes i * stride of memory from p, for a small stride (a stride-2 convolution's input
  // along its width): `stride` contiguous vector loads, the last one moved back to end at
  // the last lane's element (nothing past it is read), then one shuffle that picks the
  // lanes.
  // Under a mask (an inlined padded input's border), each part is a masked load of the
  // elements that lie between two enabled lanes (an element at i * stride + k, 0 < k <
  // stride, between lanes i and i + 1): addresses between two addresses the program
  // reads, so inside the buffer, and the picked lanes of disabled ones zero.
  static constexpr int64_t kShuffledStride = 4;
  llvm::Value* strided_by_shuffle(llvm::Type* elem, llvm::Value* p, int64_t stride, llvm::Align align) {
    const int64_t lanes = vec_->lanes, last = (lanes - 1) * stride;
    auto* vty = llvm::FixedVectorType::get(elem, static_cast<unsigned>(lanes));
    std::vector<int64_t> offset;
    std::vector<llvm::Value*> parts;
    for (int64_t j = 0; j < stride; ++j) {
      offset.push_back(std::min(j * lanes, last - (lanes - 1)));
      llvm::Value* at = b_.CreateInBoundsGEP(elem, p, b_.getInt64(offset.back()));
      if (!mask_) {
        parts.push_back(b_.CreateAlignedLoad(vty, at, align));
        continue;
      }
      std::vector<int> below, above;
      for (int64_t m = 0; m < lanes; ++m) {
        const int64_t e = offset.back() + m;
        below.push_back(static_cast<int>(e / stride));
        above.push_back(static_cast<int>(std::min(lanes - 1, (e + stride - 1) / stride)));
      }
      llvm::Value* mask = b_.CreateAnd(b_.CreateShuffleVector(mask_, below), b_.CreateShuffleVector(mask_, above));
      parts.push_back(b_.CreateMaskedLoad(vty, at, align, mask, llvm::Constant::getNullValue(vty)));
    }
    // The parts side by side in one vector of stride * lanes elements.
    std::vector<llvm::Value*> level = parts;
    std::vector<int64_t> width(level.size(), lanes);
    while (level.size() > 1) {
      std::vector<llvm::Value*> next;
      std::vector<int64_t> next_width;
      for (size_t i = 0; i + 1 < level.size(); i += 2) {
        // Two vectors of possibly different widths: pad the narrower to the wider, join.
        llvm::Value* x = level[i];
        llvm::Value* y = level[i + 1];
        int64_t wx = width[i], wy = width[i + 1], w = std::max(wx, wy);
        auto widen = [&](llvm::Value* v, int64_t from) {
          if (from == w) return v;
          std::vector<int> m;
          for (int64_t k = 0; k < w; ++k) m.push_back(k < from ? static_cast<int>(k) : -1);
          return b_.CreateShuffleVector(v, llvm::PoisonValue::get(v->getType()), m);
        };
        x = widen(x, wx);
        y = widen(y, wy);
        std::vector<int> m;
        for (int64_t k = 0; k < wx; ++k) m.push_back(static_cast<int>(k));
        for (int64_t k = 0; k < wy; ++k) m.push_back(static_cast<int>(w + k));
        next.push_back(b_.CreateShuffleVector(x, y, m));
        next_width.push_back(wx + wy);
      }
      if (level.size() % 2) {
        next.push_back(level.back());
        next_width.push_back(width.back());
      }
      level = std::move(next);
      width = std::move(next_width);
    }
    std::vector<int> pick;
    for (int64_t i = 0; i < lanes; ++i) {
      int64_t e = i * stride;
      int64_t j = stride - 1;
      while (j > 0 && offset[static_cast<size_t>(j)] > e) --j;
      pick.push_back(static_cast<int>(j * lanes + (e - offset[static_cast<size_t>(j)])));
    }
    return b_.CreateShuffleVector(level[0], llvm::PoisonValue::get(level[0]->getType()), pick);
  }

  // Lanes that alternate between two contiguous runs: an index whose even lanes 2u and
  // odd lanes 2u + 1 each read contiguously in u (a pair interleaving copy reading rows
  // 2k and 2k + 1 at column e / 2), unmasked, from an even first lane: two vector loads
  // of half the lanes, interleaved. Null where the index has no such form.
  llvm::Value* interleaved_load(const Buffer& buf, const Expr& flat, llvm::Type* elem, llvm::Align align) {
    const int lanes = vec_->lanes;
    auto* lo = llvm::dyn_cast<llvm::ConstantInt>(vec_->lo);
    if (mask_ || lanes % 2 != 0 || !lo || lo->getSExtValue() % 2 != 0) return nullptr;
    const VecLoop outer = *vec_;
    Var u(outer.var.name() + ".half");
    Analyzer an;
    Affine half[2];
    vec_ = VecLoop{u, lanes / 2, b_.getInt64(lo->getSExtValue() / 2)};
    for (int p = 0; p < 2; ++p) {
      half[p] = affine(an.simplify(substitute(flat, {{outer.var.id(), Expr(u) * 2 + p}})));
      if (!half[p].affine_in_vec || half[p].vec_coef != 1) {
        vec_ = outer;
        return nullptr;
      }
    }
    auto* hty = llvm::FixedVectorType::get(elem, static_cast<unsigned>(lanes / 2));
    llvm::Value* even = b_.CreateAlignedLoad(hty, lane0_ptr(buf, half[0]), align);
    llvm::Value* odd = b_.CreateAlignedLoad(hty, lane0_ptr(buf, half[1]), align);
    vec_ = outer;
    std::vector<int> mix;
    for (int l = 0; l < lanes; ++l) mix.push_back(l % 2 == 0 ? l / 2 : lanes / 2 + l / 2);
    return b_.CreateShuffleVector(even, odd, mix);
  }

  // A load inside a vectorized loop: a vector load, a gather, or a scalar load; masked
  // by the lanes enabled where it sits.
  llvm::Value* vector_load(const ExprNode& n) {
    llvm::Type* elem = mem_type(n.dtype);
    Expr flat = flat_expr(n.buffer, n.args);
    Affine a = affine(flat);
    Access kind = classify(a, true);
    llvm::Value* v;
    if (kind == Access::Scalar) {
      llvm::Value* p = element_ptr(n.buffer, a.base, a.offset);
      if (!mask_) {
        v = b_.CreateLoad(elem, p);
      } else {  // loaded only if some lane needs it
        llvm::Value* any = b_.CreateOrReduce(mask_);
        v = branch(
            any, [&] { return static_cast<llvm::Value*>(b_.CreateLoad(elem, p)); },
            [&] { return static_cast<llvm::Value*>(llvm::Constant::getNullValue(elem)); }, "mload");
      }
    } else {
      auto* vty = llvm::FixedVectorType::get(elem, vec_->lanes);
      llvm::Value* zero = llvm::Constant::getNullValue(vty);
      llvm::Align align(n.dtype.bytes());
      if (kind == Access::Contiguous) {
        llvm::Value* p = lane0_ptr(n.buffer, a);
        v = mask_ ? static_cast<llvm::Value*>(b_.CreateMaskedLoad(vty, p, align, mask_, zero))
                  : static_cast<llvm::Value*>(b_.CreateAlignedLoad(vty, p, align));
      } else if (kind == Access::Strided && a.vec_coef >= 2 && a.vec_coef <= kShuffledStride) {
        v = strided_by_shuffle(elem, lane0_ptr(n.buffer, a), a.vec_coef, align);
      } else if (kind == Access::Strided) {
        llvm::Value* p = lane0_ptr(n.buffer, a);
        v = zero;
        for (int i = 0; i < vec_->lanes; ++i)
          v = b_.CreateInsertElement(v, b_.CreateLoad(elem, b_.CreateInBoundsGEP(elem, p, b_.getInt64(a.vec_coef * i))),
                                     uint64_t(i));
      } else if (llvm::Value* il = interleaved_load(n.buffer, flat, elem, align)) {
        v = il;
      } else {
        llvm::Value* ptrs = b_.CreateInBoundsGEP(elem, buffer_ptr(n.buffer), index64(flat));
        v = b_.CreateMaskedGather(vty, ptrs, align, mask_ ? mask_ : all_lanes(), zero);
      }
    }
    return n.dtype.is_bool() ? b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType())) : v;
  }

  void vector_store(const StmtNode& n) {
    Expr flat = flat_expr(n.buffer, n.indices);
    Affine a = affine(flat);
    Access kind = classify(a, false);
    llvm::Value* v = expr(n.value);
    if (n.buffer->dtype.is_bool()) {
      llvm::Type* i8 = b_.getInt8Ty();
      if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType()))
        i8 = llvm::FixedVectorType::get(i8, vt->getNumElements());
      v = b_.CreateZExt(v, i8);
    }
    llvm::Type* elem = mem_type(n.buffer->dtype);
    if (kind == Access::Scalar) {
      if (is_vector(v))
        throw InternalError("a store to '" + n.buffer->name +
                            "' at one address takes a value that varies across "
                            "the lanes of a vectorized loop");
      llvm::Value* p = element_ptr(n.buffer, a.base, a.offset);
      if (!mask_) {
        b_.CreateStore(v, p);
        return;
      }
      // Stored if some lane is enabled.
      llvm::BasicBlock* sb = llvm::BasicBlock::Create(ctx_, "mstore", fn_);
      llvm::BasicBlock* eb = llvm::BasicBlock::Create(ctx_, "mstore.end", fn_);
      b_.CreateCondBr(b_.CreateOrReduce(mask_), sb, eb);
      b_.SetInsertPoint(sb);
      b_.CreateStore(v, p);
      b_.CreateBr(eb);
      b_.SetInsertPoint(eb);
      return;
    }
    v = splat(v);
    llvm::Align align(n.buffer->dtype.bytes());
    if (kind == Access::Contiguous) {
      llvm::Value* p = lane0_ptr(n.buffer, a);
      if (mask_) b_.CreateMaskedStore(v, p, align, mask_);
      else b_.CreateAlignedStore(v, p, align);
    } else if (kind == Access::Strided) {
      llvm::Value* p = lane0_ptr(n.buffer, a);
      for (int i = 0; i < vec_->lanes; ++i)
        b_.CreateStore(b_.CreateExtractElement(v, uint64_t(i)),
                       b_.CreateInBoundsGEP(elem, p, b_.getInt64(a.vec_coef * i)));
    } else {
      llvm::Value* ptrs = b_.CreateInBoundsGEP(elem, buffer_ptr(n.buffer), index64(flat));
      b_.CreateMaskedScatter(v, ptrs, align, mask_ ? mask_ : all_lanes());
    }
  }

  // A value computed on one of two paths, joined by a phi.
  template <typename T, typename F>
  llvm::Value* branch(llvm::Value* cond, T then_fn, F else_fn, const char* name) {
    llvm::BasicBlock* tb = llvm::BasicBlock::Create(ctx_, std::string(name) + ".then", fn_);
    llvm::BasicBlock* fb = llvm::BasicBlock::Create(ctx_, std::string(name) + ".else", fn_);
    llvm::BasicBlock* mb = llvm::BasicBlock::Create(ctx_, std::string(name) + ".end", fn_);
    b_.CreateCondBr(cond, tb, fb);
    auto saved_cache = addr_cache_;
    b_.SetInsertPoint(tb);
    llvm::Value* tv = then_fn();
    addr_cache_ = saved_cache;
    llvm::BasicBlock* tend = b_.GetInsertBlock();
    b_.CreateBr(mb);
    b_.SetInsertPoint(fb);
    llvm::Value* fv = else_fn();
    addr_cache_ = std::move(saved_cache);
    llvm::BasicBlock* fend = b_.GetInsertBlock();
    b_.CreateBr(mb);
    b_.SetInsertPoint(mb);
    llvm::PHINode* phi = b_.CreatePHI(tv->getType(), 2);
    phi->addIncoming(tv, tend);
    phi->addIncoming(fv, fend);
    return phi;
  }

  // ---- float32 transcendental functions as polynomials, vectorized like any
  // arithmetic (LLVM would call libm once per lane). Accurate to a few ulp; NaN in,
  // NaN out. ----

  llvm::Value* fconst(llvm::Type* ty, double v) { return llvm::ConstantFP::get(ty, v); }
  llvm::Value* call_intrinsic(llvm::Intrinsic::ID id, llvm::Type* ty, std::vector<llvm::Value*> args) {
    return b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, id, {ty}), args);
  }
  llvm::Value* fmuladd(llvm::Value* a, llvm::Value* b, llvm::Value* c) {
    return call_intrinsic(llvm::Intrinsic::fmuladd, a->getType(), {a, b, c});
  }
  // Horner's scheme, coefficients from the highest power down.
  llvm::Value* horner(llvm::Value* x, const std::vector<double>& c) {
    llvm::Type* ty = x->getType();
    llvm::Value* r = fconst(ty, c[0]);
    for (size_t i = 1; i < c.size(); ++i) r = fmuladd(r, x, fconst(ty, c[i]));
    return r;
  }
  llvm::Value* clamp(llvm::Value* x, double lo, double hi) {
    llvm::Type* ty = x->getType();
    return call_intrinsic(llvm::Intrinsic::maxnum, ty,
                          {call_intrinsic(llvm::Intrinsic::minnum, ty, {x, fconst(ty, hi)}), fconst(ty, lo)});
  }
  // NaN where x is NaN, else r.
  llvm::Value* keep_nan(llvm::Value* x, llvm::Value* r) { return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, r); }
  // The int32 type (scalar or vector) of a float32 value's bits.
  llvm::Type* int_like(llvm::Type* ty) {
    if (auto* v = llvm::dyn_cast<llvm::VectorType>(ty))
      return llvm::VectorType::get(b_.getInt32Ty(), v->getElementCount());
    return b_.getInt32Ty();
  }
  // 2^n for an integral float n in [-126, 127].
  llvm::Value* pow2(llvm::Value* n) {
    llvm::Type* ity = int_like(n->getType());
    llvm::Value* i = b_.CreateFPToSI(n, ity);
    llvm::Value* bits =
        b_.CreateShl(b_.CreateAdd(i, llvm::ConstantInt::get(ity, 127)), llvm::ConstantInt::get(ity, 23));
    return b_.CreateBitCast(bits, n->getType());
  }
  // x = n ln2 + f with |f| <= ln2/2 (Cody-Waite: ln2 in two parts, n ln2_hi exact), and
  // q = e^f - 1 = f + f^2 P(f), P of degree 4 fitted here by least squares on that
  // interval (3e-9 relative to e^f, below float32's rounding).
  std::pair<llvm::Value*, llvm::Value*> exp_parts(llvm::Value* x) {
    llvm::Type* ty = x->getType();
    llvm::Value* n = call_intrinsic(llvm::Intrinsic::rint, ty, {b_.CreateFMul(x, fconst(ty, 1.4426950408889634))});
    llvm::Value* f = fmuladd(n, fconst(ty, -0.693359375), x);
    f = fmuladd(n, fconst(ty, 2.12194440e-4), f);
    llvm::Value* p = horner(
        f, {0.0013814613093223339, 0.008368709961328158, 0.04166838737389973, 0.1666652068865695, 0.4999999345162587});
    llvm::Value* q = fmuladd(b_.CreateFMul(f, f), p, f);
    return {n, q};
  }
  // e^x for x clamped to [lo, hi] (e^lo the least normal float, hi the largest float
  // whose e^hi is finite), as 2^n e^f: t = x log2(e) + 1.5 2^23 rounds x log2(e) to the
  // integer n in t's low mantissa bits (n = t - 1.5 2^23, its bits shifted into the
  // exponent field), f = x - n ln2 (Cody-Waite, |f| <= ln2/2) and e^f = 1 + f Q(f), Q of
  // degree 4 fitted here by relative least squares (9e-8 relative before float32's
  // rounding, 1.5e-7 after; e^0 exactly 1). On that range the product stays a normal
  // float: e^f >= 1 where n = -126 and e^f < 1 where n = 128.
  llvm::Value* exp_clamped(llvm::Value* x) {
    llvm::Type* ty = x->getType();
    llvm::Type* ity = int_like(ty);
    llvm::Value* xc = clamp(x, kExpLo, kExpHi);
    const double shifter = 12582912.0;  // 1.5 2^23
    llvm::Value* t = fmuladd(xc, fconst(ty, 1.4426950408889634), fconst(ty, shifter));
    llvm::Value* n = b_.CreateFSub(t, fconst(ty, shifter));
    llvm::Value* f = fmuladd(n, fconst(ty, -0.693359375), xc);
    f = fmuladd(n, fconst(ty, 2.12194440e-4), f);
    llvm::Value* q =
        horner(f, {0.008290313551231233, 0.04189792985979268, 0.1666763621341675, 0.4999914952481076,
                   0.9999997071832493});
    llvm::Value* ef = fmuladd(f, q, fconst(ty, 1.0));
    llvm::Value* e = b_.CreateShl(b_.CreateBitCast(t, ity), llvm::ConstantInt::get(ity, 23));
    return b_.CreateBitCast(b_.CreateAdd(b_.CreateBitCast(ef, ity), e), ty);
  }
  static constexpr double kExpHi = 88.72283172607421875, kExpLo = -87.33654022216797;
  llvm::Value* fast_exp(llvm::Value* x) {
    llvm::Type* ty = x->getType();
    llvm::Value* r = exp_clamped(x);
    r = b_.CreateSelect(b_.CreateFCmpOGT(x, fconst(ty, kExpHi)), fconst(ty, HUGE_VAL), r);
    r = b_.CreateSelect(b_.CreateFCmpOLT(x, fconst(ty, kExpLo)), fconst(ty, 0.0), r);
    return keep_nan(x, r);
  }
  // 1 / (1 + e^-x) with e^-x clamped to a finite float, so that 1 + e^-x is in [1, 3.4e38]
  // and takes the reciprocal estimate instead of a division; 0 where e^-x overflows (x <
  // -88.72: the true value is below the least normal float), NaN for NaN.
  llvm::Value* fast_sigmoid(llvm::Value* x) {
    llvm::Type* ty = x->getType();
    llvm::Value* s = reciprocal_of_positive(b_.CreateFAdd(fconst(ty, 1.0), exp_clamped(b_.CreateFNeg(x))), false);
    s = b_.CreateSelect(b_.CreateFCmpOLT(x, fconst(ty, -kExpHi)), fconst(ty, 0.0), s);
    return keep_nan(x, s);
  }
  // tanh x = expm1(2x) / (expm1(2x) + 2), expm1 = 2^n q + (2^n - 1): exact near 0.
  llvm::Value* fast_tanh(llvm::Value* x) {
    llvm::Type* ty = x->getType();
    llvm::Value* x2 = b_.CreateFMul(clamp(x, -9.0, 9.0), fconst(ty, 2.0));  // tanh(9) rounds to 1
    auto [n, q] = exp_parts(x2);
    llvm::Value* p = pow2(n);
    llvm::Value* y = fmuladd(p, q, b_.CreateFSub(p, fconst(ty, 1.0)));
    return keep_nan(x, b_.CreateFDiv(y, b_.CreateFAdd(y, fconst(ty, 2.0))));
  }
  // erf x = x P(x^2) / Q(x^2) for x clamped to [-4, 4] (where float32's erf is 1 beyond):
  // P of degree 6 and Q of degree 4 fitted here to erf(x) / x by relative least squares
  // (Loeb's iterations) on [0, 4], 6.5e-8 relative before float32's rounding; one
  // division and no exponential, a third of the instructions of 1 - t e^(-z^2 + P(t)).
  llvm::Value* fast_erf(llvm::Value* x) {
    llvm::Value* xc = clamp(x, -4.0, 4.0);
    llvm::Value* t = b_.CreateFMul(xc, xc);
    llvm::Value* p = horner(t, {1.9112307747641844e-08, -1.942324059580849e-06, 0.0001472736498158231,
                                0.003989932929253825, 0.051522779220853764, 0.2071095767353118, 1.1283790940032885});
    llvm::Value* q =
        horner(t, {0.0010209663036156687, 0.014956735065622897, 0.11796424805234047, 0.5168773323769186, 1.0});
    return keep_nan(x, b_.CreateFMul(b_.CreateFMul(xc, p), reciprocal_of_positive(q)));
  }
  // 1 / q for q >= 1 (finite: no zero, infinity or NaN): on vectors of 16 or 8 float32 the
  // CPU's estimate (vrcp14ps, 14 bits; vrcpps, 12 bits) refined by Newton's steps, r (2 -
  // q r), to below float32's rounding, where a division would take four times as long.
  // Without `narrow_estimate`, 8 lanes divide: Zen 4 divides 8 float32 faster than it
  // refines vrcpps's estimate twice (the sigmoid's 1 + e^-x).
  llvm::Value* reciprocal_of_positive(llvm::Value* q, bool narrow_estimate = true) {
    llvm::Type* ty = q->getType();
    auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(ty);
    const unsigned lanes = vt ? vt->getNumElements() : 1;
    const std::string& isa = this_host().vector_isa;
    llvm::Value* r = nullptr;
    int steps = 0;
    if (lanes == 16 && isa == "avx512") {
      r = b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::x86_avx512_rcp14_ps_512),
                        {q, llvm::Constant::getNullValue(ty), b_.getInt16(0xffff)});
      steps = 1;
    } else if (lanes == 8 && narrow_estimate && (isa == "avx512" || isa == "avx2")) {
      r = b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::x86_avx_rcp_ps_256), {q});
      steps = 2;
    } else {
      return b_.CreateFDiv(fconst(ty, 1.0), q);
    }
    for (int i = 0; i < steps; ++i) r = fmuladd(fmuladd(b_.CreateFNeg(q), r, fconst(ty, 1.0)), r, r);
    return r;
  }

  // round_to_tf32 (core/expr/evaluate.h) on the float32 bits: add half an ulp of TF32 to
  // the magnitude, clear the 13 low bits; NaN and infinities unchanged.
  llvm::Value* tf32(llvm::Value* x, DType t) {
    llvm::Type* fty = x->getType();
    llvm::Type* f32ty = is_vector(x) ? static_cast<llvm::Type*>(llvm::VectorType::get(
                                           b_.getFloatTy(), llvm::cast<llvm::VectorType>(fty)->getElementCount()))
                                     : b_.getFloatTy();
    llvm::Value* f = t.bits == 32 ? x : b_.CreateFPTrunc(x, f32ty);
    llvm::Type* ity = is_vector(x) ? static_cast<llvm::Type*>(llvm::VectorType::get(
                                         b_.getInt32Ty(), llvm::cast<llvm::VectorType>(fty)->getElementCount()))
                                   : b_.getInt32Ty();
    llvm::Value* u = b_.CreateBitCast(f, ity);
    u = b_.CreateAnd(b_.CreateAdd(u, llvm::ConstantInt::get(ity, 0x1000)), llvm::ConstantInt::get(ity, 0xffffe000u));
    llvm::Value* r = b_.CreateBitCast(u, f32ty);
    llvm::Value* finite =
        b_.CreateFCmpOLT(call_intrinsic(llvm::Intrinsic::fabs, f32ty, {f}), llvm::ConstantFP::getInfinity(f32ty));
    r = b_.CreateSelect(finite, r, f);
    return t.bits == 32 ? r : b_.CreateFPExt(r, fty);
  }

  // round_to_fp16 and round_to_bf16 (core/expr/evaluate.h): binary16 by LLVM's own
  // conversions (to nearest even, overflow to infinity, subnormals kept); bfloat16 on the
  // float32 bits, adding 0x7fff and the kept part's lowest bit and clearing the 16 low
  // bits, NaN unchanged.
  llvm::Value* half_rounding(llvm::Value* x, DType t, bool bf16) {
    llvm::Type* fty = x->getType();
    auto like = [&](llvm::Type* scalar) -> llvm::Type* {
      return is_vector(x) ? static_cast<llvm::Type*>(
                                llvm::VectorType::get(scalar, llvm::cast<llvm::VectorType>(fty)->getElementCount()))
                          : scalar;
    };
    llvm::Type* f32ty = like(b_.getFloatTy());
    llvm::Value* f = t.bits == 32 ? x : b_.CreateFPTrunc(x, f32ty);
    llvm::Value* r;
    if (!bf16) {
      r = b_.CreateFPExt(b_.CreateFPTrunc(f, like(b_.getHalfTy())), f32ty);
    } else {
      llvm::Type* ity = like(b_.getInt32Ty());
      llvm::Value* u = b_.CreateBitCast(f, ity);
      llvm::Value* lsb =
          b_.CreateAnd(b_.CreateLShr(u, llvm::ConstantInt::get(ity, 16)), llvm::ConstantInt::get(ity, 1));
      u = b_.CreateAdd(b_.CreateAdd(u, llvm::ConstantInt::get(ity, 0x7fff)), lsb);
      r = b_.CreateBitCast(b_.CreateAnd(u, llvm::ConstantInt::get(ity, 0xffff0000u)), f32ty);
      r = b_.CreateSelect(b_.CreateFCmpUNO(f, f), f, r);
    }
    return t.bits == 32 ? r : b_.CreateFPExt(r, fty);
  }

  llvm::Value* math(MathFn f, DType t, std::vector<llvm::Value*> a) {
    bool vec = false;
    for (llvm::Value* x : a) vec |= is_vector(x);
    if (vec)
      for (llvm::Value*& x : a) x = splat(x);
    llvm::Type* ty = type_like(t, a[0]);
    auto intrinsic = [&](llvm::Intrinsic::ID id) { return call_intrinsic(id, ty, a); };
    const bool f32 = t.is_float() && t.bits == 32;  // exp, sigmoid, tanh, erf: the polynomials
    auto libm = [&](const char* name) -> llvm::Value* {
      std::string n = t.bits == 32 ? std::string(name) + "f" : name;
      llvm::Type* sty = reg_type(t);
      std::vector<llvm::Type*> types(a.size(), sty);
      llvm::FunctionCallee c = mod_.getOrInsertFunction(n, llvm::FunctionType::get(sty, types, false));
      if (auto* fn = llvm::dyn_cast<llvm::Function>(c.getCallee())) {
        fn->setDoesNotThrow();
        fn->setDoesNotAccessMemory();
      }
      if (!vec) return b_.CreateCall(c, a);
      llvm::Value* out = llvm::UndefValue::get(ty);  // one call per lane
      for (int l = 0; l < vec_->lanes; ++l) {
        std::vector<llvm::Value*> lane;
        for (llvm::Value* x : a) lane.push_back(b_.CreateExtractElement(x, uint64_t(l)));
        out = b_.CreateInsertElement(out, b_.CreateCall(c, lane), uint64_t(l));
      }
      return out;
    };
    llvm::Value* one = llvm::ConstantFP::get(ty, 1.0);
    switch (f) {
      case MathFn::exp:
        return f32 ? fast_exp(a[0]) : intrinsic(llvm::Intrinsic::exp);
      case MathFn::log:
        return intrinsic(llvm::Intrinsic::log);
      case MathFn::sqrt:
        return intrinsic(llvm::Intrinsic::sqrt);
      case MathFn::rsqrt:
        return b_.CreateFDiv(one, intrinsic(llvm::Intrinsic::sqrt));
      case MathFn::pow:
        return intrinsic(llvm::Intrinsic::pow);
      case MathFn::sigmoid: {
        llvm::Value* minus = b_.CreateFNeg(a[0]);
        if (!f32) return b_.CreateFDiv(one, b_.CreateFAdd(one, call_intrinsic(llvm::Intrinsic::exp, ty, {minus})));
        return fast_sigmoid(a[0]);
      }
      case MathFn::tanh:
        return f32 ? fast_tanh(a[0]) : libm("tanh");
      case MathFn::erf:
        return f32 ? fast_erf(a[0]) : libm("erf");
      case MathFn::fabs:
        return intrinsic(llvm::Intrinsic::fabs);
      case MathFn::floor:
        return intrinsic(llvm::Intrinsic::floor);
      case MathFn::ceil:
        return intrinsic(llvm::Intrinsic::ceil);
      case MathFn::rint:
        return intrinsic(llvm::Intrinsic::roundeven);
      case MathFn::sin:
        return libm("sin");
      case MathFn::cos:
        return libm("cos");
      case MathFn::tf32:
        return tf32(a[0], t);
      case MathFn::fp16:
        return half_rounding(a[0], t, false);
      case MathFn::bf16:
        return half_rounding(a[0], t, true);
    }
    return a[0];
  }

  // Integer division is defined for every pair of operands, as the interpreter defines
  // it: a zero divisor gives 0 (quotient and remainder, as numpy), INT_MIN / -1 wraps
  // to INT_MIN and INT_MIN % -1 is 0. The hardware instruction traps on both (SIGFPE),
  // so a divisor that is not a constant other than 0 and -1 goes through a safe one.
  llvm::Value* int_division(ExprKind k, llvm::Value* x, llvm::Value* y) {
    llvm::Type* t = x->getType();
    llvm::Value* zero = llvm::ConstantInt::get(t, 0);
    llvm::Value* minus_one = llvm::ConstantInt::getSigned(t, -1);
    auto* c = llvm::dyn_cast<llvm::ConstantInt>(y);
    if (auto* v = llvm::dyn_cast<llvm::Constant>(y); v && !c && v->getType()->isVectorTy())
      c = llvm::dyn_cast_or_null<llvm::ConstantInt>(v->getSplatValue());
    const bool safe = c && !c->isZero() && !c->isMinusOne();
    llvm::Value* y_is_zero = nullptr;
    llvm::Value* y_is_minus_one = nullptr;
    llvm::Value* d = y;
    if (!safe) {
      y_is_zero = b_.CreateICmpEQ(y, zero);
      y_is_minus_one = b_.CreateICmpEQ(y, minus_one);
      d = b_.CreateSelect(b_.CreateOr(y_is_zero, y_is_minus_one), llvm::ConstantInt::get(t, 1), y);
    }
    llvm::Value* r = nullptr;
    if (k == ExprKind::Div) {
      r = b_.CreateSDiv(x, d);
    } else {
      llvm::Value* q = b_.CreateSDiv(x, d);
      llvm::Value* rem = b_.CreateSRem(x, d);
      llvm::Value* adjust = b_.CreateAnd(b_.CreateICmpNE(rem, zero),
                                         b_.CreateICmpNE(b_.CreateICmpSLT(rem, zero), b_.CreateICmpSLT(d, zero)));
      r = k == ExprKind::FloorDiv ? b_.CreateSub(q, b_.CreateZExt(adjust, t))
                                  : b_.CreateSelect(adjust, b_.CreateAdd(rem, d), rem);
    }
    if (safe) return r;
    // y == -1: the quotient is -x (wrapping), the remainder 0.
    llvm::Value* by_minus_one = k == ExprKind::FloorMod ? zero : b_.CreateSub(zero, x);
    r = b_.CreateSelect(y_is_minus_one, by_minus_one, r);
    return b_.CreateSelect(y_is_zero, zero, r);
  }

  llvm::Value* int_binary(ExprKind k, llvm::Value* x, llvm::Value* y) {
    switch (k) {
      case ExprKind::Add:
        return b_.CreateAdd(x, y);
      case ExprKind::Sub:
        return b_.CreateSub(x, y);
      case ExprKind::Mul:
        return b_.CreateMul(x, y);
      case ExprKind::Div:
      case ExprKind::FloorDiv:
      case ExprKind::FloorMod:
        return int_division(k, x, y);
      case ExprKind::Min:
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, y);
      case ExprKind::Max:
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, y);
      default:
        break;
    }
    BASIN_CHECK(false) << "integer " << kind_name(k);
    return nullptr;
  }

  // Max and min propagate NaN (core/expr/expr.h): NaN where either operand is, else the
  // larger (smaller). A constant operand (not NaN) goes first: select(c > v, c, v) is
  // x86's maxps exactly, one instruction that returns v where v is NaN (a ReLU, a clip).
  // Two variables take one more compare and blend, for a NaN in the first.
  llvm::Value* nan_max_min(bool is_max, llvm::Value* x, llvm::Value* y) {
    auto pick = [&](llvm::Value* a, llvm::Value* b) {  // a where it beats b, else b (b's NaN kept)
      return b_.CreateSelect(is_max ? b_.CreateFCmpOGT(a, b) : b_.CreateFCmpOLT(a, b), a, b);
    };
    auto constant_number = [](llvm::Value* v) {
      const llvm::APFloat* f = nullptr;
      return llvm::isa<llvm::Constant>(v) && llvm::PatternMatch::match(v, llvm::PatternMatch::m_APFloat(f)) &&
             !f->isNaN();
    };
    if (constant_number(x)) return pick(x, y);
    if (constant_number(y)) return pick(y, x);
    return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, pick(x, y));
  }

  llvm::Value* float_binary(ExprKind k, llvm::Value* x, llvm::Value* y) {
    switch (k) {
      case ExprKind::Add:
        return b_.CreateFAdd(x, y);
      case ExprKind::Sub:
        return b_.CreateFSub(x, y);
      case ExprKind::Mul:
        return b_.CreateFMul(x, y);
      case ExprKind::Div:
        return b_.CreateFDiv(x, y);
      case ExprKind::Min:
      case ExprKind::Max:
        return nan_max_min(k == ExprKind::Max, x, y);
      default:
        break;
    }
    BASIN_CHECK(false) << "float " << kind_name(k);
    return nullptr;
  }

  llvm::Value* compare(ExprKind k, DType t, llvm::Value* x, llvm::Value* y) {
    if (t.is_float()) {
      switch (k) {
        case ExprKind::EQ:
          return b_.CreateFCmpOEQ(x, y);
        case ExprKind::NE:
          return b_.CreateFCmpUNE(x, y);
        case ExprKind::LT:
          return b_.CreateFCmpOLT(x, y);
        case ExprKind::LE:
          return b_.CreateFCmpOLE(x, y);
        case ExprKind::GT:
          return b_.CreateFCmpOGT(x, y);
        default:
          return b_.CreateFCmpOGE(x, y);
      }
    }
    switch (k) {
      case ExprKind::EQ:
        return b_.CreateICmpEQ(x, y);
      case ExprKind::NE:
        return b_.CreateICmpNE(x, y);
      case ExprKind::LT:
        return b_.CreateICmpSLT(x, y);
      case ExprKind::LE:
        return b_.CreateICmpSLE(x, y);
      case ExprKind::GT:
        return b_.CreateICmpSGT(x, y);
      default:
        return b_.CreateICmpSGE(x, y);
    }
  }

  // bfloat16 (a storage type, i16 in registers) to and from float32: the float's upper
  // 16 bits, rounded to nearest even, a subnormal float a zero of its sign, a NaN a quiet
  // NaN (bf16_bits): vcvtneps2bf16 on vectors of 8 or 16 lanes where the CPU has
  // AVX512-BF16, the same arithmetic elsewhere.
  llvm::Value* from_bf16(llvm::Value* v) {
    llvm::Type* i32 = type_like(DType::i32(), v);
    return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, i32), llvm::ConstantInt::get(i32, 16)),
                            type_like(DType::f32(), v));
  }
  llvm::Value* to_bf16(llvm::Value* f) {
    if (bf16_dot_ && is_vector(f)) {
      const int lanes = static_cast<int>(llvm::cast<llvm::FixedVectorType>(f->getType())->getNumElements());
      const int chunk = lanes % 16 == 0 ? 16 : lanes % 8 == 0 ? 8 : 0;
      if (chunk > 0) {
        llvm::Function* cvt =
            llvm::Intrinsic::getDeclaration(&mod_, chunk == 16 ? llvm::Intrinsic::x86_avx512bf16_cvtneps2bf16_512
                                                               : llvm::Intrinsic::x86_avx512bf16_cvtneps2bf16_256);
        llvm::Type* part = llvm::FixedVectorType::get(b_.getInt16Ty(), static_cast<unsigned>(chunk));
        return by_chunks(f, lanes, chunk,
                         [&](int, llvm::Value* x) { return b_.CreateBitCast(b_.CreateCall(cvt, {x}), part); });
      }
    }
    llvm::Type* i32 = type_like(DType::i32(), f);
    llvm::Value* u = b_.CreateBitCast(f, i32);
    llvm::Value* r = b_.CreateBitCast(half_rounding(f, DType::f32(), true), i32);
    llvm::Value* subnormal =
        b_.CreateICmpEQ(b_.CreateAnd(u, llvm::ConstantInt::get(i32, 0x7f800000)), llvm::ConstantInt::get(i32, 0));
    r = b_.CreateSelect(subnormal, b_.CreateAnd(u, llvm::ConstantInt::get(i32, 0x80000000u)), r);
    llvm::Value* nan = b_.CreateOr(u, llvm::ConstantInt::get(i32, 0x400000));
    r = b_.CreateSelect(b_.CreateFCmpUNO(f, f), nan, r);
    return b_.CreateTrunc(b_.CreateLShr(r, llvm::ConstantInt::get(i32, 16)), type_like(DType::bf16(), f));
  }

  // A float to an 8-bit integer saturates to its range, truncating toward zero, NaN to
  // 0 (fptoui.sat and fptosi.sat's rule), as compares and selects that a vector keeps
  // (max, min, one conversion to int32, a truncation): LLVM 16 takes the intrinsics on
  // vectors apart lane by lane.
  // A float saturated to an 8-bit type's range, still a float: NaN gives 0.
  llvm::Value* saturate_to_byte(DType to, llvm::Value* v) {
    const bool is_unsigned = to.is_uint();
    llvm::Value* lo = llvm::ConstantFP::get(v->getType(), is_unsigned ? 0.0 : -128.0);
    llvm::Value* hi = llvm::ConstantFP::get(v->getType(), is_unsigned ? 255.0 : 127.0);
    // An ordered compare is false on NaN: the first select makes NaN `lo`, 0 for uint8.
    llvm::Value* x = b_.CreateSelect(b_.CreateFCmpOGT(v, lo), v, lo);
    x = b_.CreateSelect(b_.CreateFCmpOLT(x, hi), x, hi);
    if (!is_unsigned) x = b_.CreateSelect(b_.CreateFCmpUNO(v, v), llvm::ConstantFP::get(v->getType(), 0.0), x);
    return x;
  }

  llvm::Value* float_to_byte(DType to, llvm::Value* v) {
    return b_.CreateTrunc(b_.CreateFPToSI(saturate_to_byte(to, v), type_like(DType::i32(), v)), type_like(to, v));
  }

  // Whether a float expression's value is always an integer (or NaN or infinite): a
  // rounding, an integer converted, and sums, differences, products, minima, maxima and
  // selections of such values (a sum of two integers rounds to an integer: every float
  // of 2^24 or more is one).
  static bool integral(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::FloatImm:
        return e->fval == std::nearbyint(e->fval);
      case ExprKind::Cast:
        return !e->args[0].dtype().is_float() && !e->args[0].dtype().is_bf16();
      case ExprKind::Call:
        return e->fn == MathFn::rint || e->fn == MathFn::floor || e->fn == MathFn::ceil;
      case ExprKind::Add:
      case ExprKind::Sub:
      case ExprKind::Mul:
      case ExprKind::Min:
      case ExprKind::Max:
        return integral(e->args[0]) && integral(e->args[1]);
      case ExprKind::Select:
        return integral(e->args[1]) && integral(e->args[2]);
      default:
        return false;
    }
  }

  // float(uint8(q + z)) - z of an integral q and an integer z that the arithmetic
  // analyzer bounds by 2^20 (fake_quantize's clamped zero point), converted (a value
  // quantized and dequantized in one kernel): q saturated to [-z, 255 - z]
  // as floats, exact (NaN to -z, as the cast takes it to 0). Null where e is not of
  // that form.
  llvm::Value* quantization_round_trip(const ExprNode& n) {
    const Expr& a = n.args[0];
    if (!n.dtype.is_float() || n.dtype.bits != 32 || a.kind() != ExprKind::Cast || a.dtype() != n.dtype) return nullptr;
    const Expr& byte = a->args[0];
    if (byte.kind() != ExprKind::Cast || byte.dtype() != DType::u8()) return nullptr;
    const Expr& sum = byte->args[0];
    if (sum.kind() != ExprKind::Add || sum.dtype() != n.dtype || !structural_equal(sum->args[1], n.args[1]) ||
        !integral(sum->args[0]))
      return nullptr;
    const Expr& z = sum->args[1];
    if (z.kind() != ExprKind::Cast || !z->args[0].dtype().is_int() ||
        !Analyzer().bound(z->args[0]).within(-(1 << 20), 1 << 20))
      return nullptr;
    llvm::Value* q = expr(sum->args[0]);
    llvm::Value* zv = expr(z);
    unify(q, zv);
    llvm::Value* zero = llvm::ConstantFP::get(zv->getType(), 0.0);
    llvm::Value* lo = b_.CreateFSub(zero, zv);  // +0 for z = 0, as 0 - z is
    llvm::Value* hi = b_.CreateFSub(llvm::ConstantFP::get(zv->getType(), 255.0), zv);
    // Ordered compares: NaN takes the lower bound. Adding +0 makes q's -0 (a small
    // negative rounded) the +0 that (q + z) - z is.
    llvm::Value* x = b_.CreateSelect(b_.CreateFCmpOGT(q, lo), q, lo);
    return b_.CreateFAdd(b_.CreateSelect(b_.CreateFCmpOLT(x, hi), x, hi), zero);
  }

  // float(byte(v)) of a float v: v saturated and rounded toward zero, as floats (a
  // quantization undone in the same kernel), no conversion to integers and back; an
  // integral v (a quantized value) needs no rounding.
  llvm::Value* float_through_byte(DType to, DType byte, const Expr& from) {
    llvm::Value* v = expr(from);
    if (from.dtype().bits != 32) v = b_.CreateFPCast(v, type_like(DType::f32(), v));
    llvm::Value* x = saturate_to_byte(byte, v);
    if (!integral(from)) x = b_.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, x);
    return to.bits == 32 ? x : b_.CreateFPCast(x, type_like(to, v));
  }

  llvm::Value* cast(DType to, DType from, llvm::Value* v) {
    llvm::Type* ty = type_like(to, v);
    if (to == from) return v;
    if (from.is_bf16()) return to.is_float() && to.bits == 32 ? from_bf16(v) : cast(to, DType::f32(), from_bf16(v));
    if (to.is_bf16()) return to_bf16(from.bits == 32 ? v : b_.CreateFPTrunc(v, type_like(DType::f32(), v)));
    if (to.is_bool()) {
      return from.is_float() ? b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
                             : b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    }
    if (to.is_float()) {
      if (from.is_float()) return b_.CreateFPCast(v, ty);
      return from.is_bool() || from.is_uint() ? b_.CreateUIToFP(v, ty) : b_.CreateSIToFP(v, ty);
    }
    if (from.is_float() && to.is_byte()) return float_to_byte(to, v);
    if (from.is_float()) return b_.CreateFPToSI(v, ty);
    return from.is_bool() || from.is_uint() ? b_.CreateZExtOrTrunc(v, ty) : b_.CreateSExtOrTrunc(v, ty);
  }

  llvm::Value* expr(const Expr& e) {
    const ExprNode& n = *e;
    switch (n.kind) {
      case ExprKind::IntImm:
        return llvm::ConstantInt::get(reg_type(n.dtype), static_cast<uint64_t>(n.ival), true);
      case ExprKind::FloatImm:
        return llvm::ConstantFP::get(reg_type(n.dtype), n.fval);
      case ExprKind::Var: {
        auto it = vars_.find(n.ival);
        BASIN_CHECK(it != vars_.end()) << "unbound variable " << n.name;
        return it->second;
      }
      case ExprKind::Add:
      case ExprKind::Sub:
      case ExprKind::Mul:
      case ExprKind::Div:
      case ExprKind::FloorDiv:
      case ExprKind::FloorMod:
      case ExprKind::Min:
      case ExprKind::Max: {
        if (n.kind == ExprKind::Sub)
          if (llvm::Value* r = quantization_round_trip(n)) return r;
        llvm::Value* x = expr(n.args[0]);
        llvm::Value* y = expr(n.args[1]);
        unify(x, y);
        return n.dtype.is_float() ? float_binary(n.kind, x, y) : int_binary(n.kind, x, y);
      }
      case ExprKind::EQ:
      case ExprKind::NE:
      case ExprKind::LT:
      case ExprKind::LE:
      case ExprKind::GT:
      case ExprKind::GE: {
        llvm::Value* x = expr(n.args[0]);
        llvm::Value* y = expr(n.args[1]);
        unify(x, y);
        return compare(n.kind, n.args[0].dtype(), x, y);
      }
      case ExprKind::And:
      case ExprKind::Or: {
        bool is_and = n.kind == ExprKind::And;
        llvm::Value* x = expr(n.args[0]);
        const Expr& rhs = n.args[1];
        if (!may_fault(rhs)) {
          llvm::Value* y = expr(rhs);
          unify(x, y);
          return is_and ? b_.CreateAnd(x, y) : b_.CreateOr(x, y);
        }
        if (vec_ && !is_vector(x)) x = splat(x);
        if (is_vector(x)) {  // the right side runs only on the lanes that need it
          llvm::Value* y = masked(is_and ? x : b_.CreateNot(x), [&] { return expr(rhs); });
          unify(x, y);
          return is_and ? b_.CreateAnd(x, y) : b_.CreateOr(x, y);
        }
        llvm::Type* bty = nullptr;
        auto rhs_fn = [&] {
          llvm::Value* y = expr(rhs);
          bty = y->getType();
          return y;
        };
        if (is_and)
          return branch_typed(
              x, rhs_fn, [&](llvm::Type* t) { return llvm::ConstantInt::getFalse(t); }, "and");
        return branch_typed(
            b_.CreateNot(x), rhs_fn, [&](llvm::Type* t) { return llvm::ConstantInt::getTrue(t); }, "or");
      }
      case ExprKind::Not:
        return b_.CreateNot(expr(n.args[0]));
      case ExprKind::Select: {
        llvm::Value* c = expr(n.args[0]);
        bool faults = may_fault(n.args[1], loads_in_bounds_) || may_fault(n.args[2], loads_in_bounds_);
        // A uniform condition with operands that vary across lanes is a scalar branch
        // between whole vectors: as a mask, the side not taken became masked loads whose
        // disabled lanes still address memory outside its buffer (a concatenation's
        // other input, tens of KB away), on pages that may not be mapped, where masked
        // loads take the CPU's slow path (shufflenet's 232-channel concat: 238 us in the
        // network, 11 us alone).
        if (vec_ && faults && !is_vector(c) && (uses_var(n.args[1], vec_->var) || uses_var(n.args[2], vec_->var)))
          return branch(
              c, [&] { return splat(expr(n.args[1])); }, [&] { return splat(expr(n.args[2])); }, "select");
        if (is_vector(c)) {
          llvm::Value* t = faults ? masked(c, [&] { return expr(n.args[1]); }) : expr(n.args[1]);
          llvm::Value* f = faults ? masked(b_.CreateNot(c), [&] { return expr(n.args[2]); }) : expr(n.args[2]);
          return b_.CreateSelect(c, splat(t), splat(f));
        }
        if (!faults) {
          llvm::Value* t = expr(n.args[1]);
          llvm::Value* f = expr(n.args[2]);
          unify(t, f);
          return b_.CreateSelect(c, t, f);
        }
        return branch(
            c, [&] { return expr(n.args[1]); }, [&] { return expr(n.args[2]); }, "select");
      }
      case ExprKind::Cast: {
        const Expr& a = n.args[0];
        if (n.dtype.is_float() && a.dtype().is_byte() && a.kind() == ExprKind::Cast && a->args[0].dtype().is_float())
          return float_through_byte(n.dtype, a.dtype(), a->args[0]);
        return cast(n.dtype, a.dtype(), expr(a));
      }
      case ExprKind::Call: {
        std::vector<llvm::Value*> a;
        for (const Expr& x : n.args) a.push_back(expr(x));
        return math(n.fn, n.dtype, a);
      }
      case ExprKind::Load: {
        if (vec_) return vector_load(n);
        llvm::Value* v = b_.CreateLoad(mem_type(n.dtype), address(n.buffer, n.args));
        return n.dtype.is_bool() ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
      }
    }
    return nullptr;
  }

  // Evaluates f with only the lanes of `cond` (and of the enclosing mask) enabled.
  template <typename F>
  llvm::Value* masked(llvm::Value* cond, F f) {
    llvm::Value* saved = mask_;
    mask_ = mask_ ? b_.CreateAnd(mask_, cond) : cond;
    llvm::Value* v = f();
    mask_ = saved;
    return v;
  }

  // Like branch(), when the else value is a constant of the then value's type.
  template <typename T, typename F>
  llvm::Value* branch_typed(llvm::Value* cond, T then_fn, F else_const, const char* name) {
    llvm::Type* ty = nullptr;
    return branch(
        cond,
        [&] {
          llvm::Value* v = then_fn();
          ty = v->getType();
          return v;
        },
        [&] { return static_cast<llvm::Value*>(else_const(ty)); }, name);
  }

  // The variable of a loop iteration, in the variable's own type.
  llvm::Value* as_var_type(const Var& v, llvm::Value* iv64) {
    if (v.dtype() == DType::i64()) return iv64;
    return b_.CreateTrunc(iv64, type_like(v.dtype(), iv64));
  }

  void serial_loop(const StmtNode& n, llvm::Value* lo, llvm::Value* hi) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    llvm::BasicBlock* header = llvm::BasicBlock::Create(ctx_, n.var.name() + ".header", fn_);
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, n.var.name() + ".body", fn_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, n.var.name() + ".exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, n.var.name());
    iv->addIncoming(lo, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(iv, hi), body, exit);
    b_.SetInsertPoint(body);
    vars_[n.var.id()] = as_var_type(n.var, iv);
    auto saved_cache = addr_cache_;  // what was computed before the loop dominates its body and exit
    stmt(n.body[0]);
    addr_cache_ = std::move(saved_cache);
    vars_.erase(n.var.id());
    llvm::Value* next = b_.CreateAdd(iv, b_.getInt64(1), "", /*HasNUW=*/false, /*HasNSW=*/true);
    iv->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(header);
    b_.SetInsertPoint(exit);
  }

  void loop(const StmtNode& n) {
    int64_t extent = -1;
    bool const_extent = is_const_int(n.extent, &extent);
    if (n.for_kind == ForKind::Unrolled && const_extent) {
      llvm::Value* lo = scalar_index64(n.min, "a loop bound");
      for (int64_t i = 0; i < extent; ++i) {
        vars_[n.var.id()] = as_var_type(n.var, b_.CreateAdd(lo, b_.getInt64(i)));
        stmt(n.body[0]);
      }
      vars_.erase(n.var.id());
      return;
    }
    if (n.for_kind == ForKind::Vectorized && const_extent && !vec_ && extent >= 1) {
      llvm::Value* lo = scalar_index64(n.min, "a loop bound");
      if (extent == 1) {
        vars_[n.var.id()] = as_var_type(n.var, lo);
      } else {
        std::vector<llvm::Constant*> steps;
        for (int64_t i = 0; i < extent; ++i) steps.push_back(b_.getInt64(i));
        vec_ = VecLoop{n.var, static_cast<int>(extent), lo};
        llvm::Value* lanes = b_.CreateAdd(splat(lo), llvm::ConstantVector::get(steps), n.var.name());
        vars_[n.var.id()] = as_var_type(n.var, lanes);
      }
      stmt(n.body[0]);
      vec_.reset();
      vars_.erase(n.var.id());
      return;
    }
    if (n.for_kind == ForKind::Parallel && !vec_ && !in_parallel_) {
      parallel_loop(n);
      return;
    }
    llvm::Value* lo = scalar_index64(n.min, "a loop bound");
    llvm::Value* hi = b_.CreateAdd(lo, scalar_index64(n.extent, "a loop extent"), n.var.name() + ".end");
    serial_loop(n, lo, hi);
  }

  // Outlines a parallel loop: body(ctx, begin, end) unpacks the captured values and
  // calls an always-inlined function that takes them as arguments (buffers noalias).
  void parallel_loop(const StmtNode& n) {
    llvm::Type* ptr = llvm::PointerType::get(ctx_, 0);
    llvm::Type* i64 = b_.getInt64Ty();
    std::vector<std::pair<int64_t, llvm::Value*>> cvars(vars_.begin(), vars_.end());
    std::vector<std::pair<const BufferNode*, llvm::Value*>> cbufs(bufs_.begin(), bufs_.end());
    std::vector<llvm::Type*> var_types;
    for (auto& [id, v] : cvars) var_types.push_back(v->getType());
    size_t slots = cvars.size() + cbufs.size();

    // At the call site: the context array, the extent, the runtime call.
    llvm::Value* ctx_arr;
    {
      llvm::IRBuilder<> eb(entry_block_, entry_block_->begin());
      ctx_arr = eb.CreateAlloca(i64, eb.getInt64(static_cast<int64_t>(std::max<size_t>(1, slots))), "par.ctx");
    }
    size_t slot = 0;
    for (auto& [id, v] : cvars)
      b_.CreateStore(v->getType() == i64 ? v : b_.CreateSExt(v, i64),
                     b_.CreateConstInBoundsGEP1_64(i64, ctx_arr, slot++));
    for (auto& [buf, p] : cbufs) b_.CreateStore(p, b_.CreateConstInBoundsGEP1_64(i64, ctx_arr, slot++));
    llvm::Value* extent = scalar_index64(n.extent, "a parallel extent");

    // The inner function: (bufs..., vars..., begin, end).
    std::vector<llvm::Type*> inner_args(cbufs.size(), ptr);
    for (size_t i = 0; i < cvars.size(); ++i) inner_args.push_back(i64);
    inner_args.push_back(i64);
    inner_args.push_back(i64);
    std::string base = fn_->getName().str() + "_par" + std::to_string(++outlined_);
    auto* inner = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), inner_args, false),
                                         llvm::Function::InternalLinkage, base + "_body", mod_);
    inner->addFnAttr(llvm::Attribute::AlwaysInline);
    inner->addFnAttr(llvm::Attribute::NoUnwind);
    for (size_t i = 0; i < cbufs.size(); ++i) inner->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoAlias);

    // The outlined entry: (ctx, begin, end).
    auto* outer = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64, i64}, false),
                                         llvm::Function::InternalLinkage, base, mod_);
    outer->addFnAttr(llvm::Attribute::NoUnwind);

    llvm::IRBuilderBase::InsertPoint saved_ip = b_.saveIP();
    llvm::Function* saved_fn = fn_;
    llvm::BasicBlock* saved_entry = entry_block_;
    auto saved_vars = vars_;
    auto saved_bufs = bufs_;
    auto saved_cache = std::move(addr_cache_);
    addr_cache_.clear();

    {  // outer: unpack and call
      b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", outer));
      std::vector<llvm::Value*> args(cbufs.size() + cvars.size());
      size_t s2 = 0;
      for (size_t i = 0; i < cvars.size(); ++i)
        args[cbufs.size() + i] = b_.CreateLoad(i64, b_.CreateConstInBoundsGEP1_64(i64, outer->getArg(0), s2++));
      for (size_t i = 0; i < cbufs.size(); ++i)
        args[i] = b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(i64, outer->getArg(0), s2++));
      args.push_back(outer->getArg(1));
      args.push_back(outer->getArg(2));
      b_.CreateCall(inner, args);
      b_.CreateRetVoid();
    }
    {  // inner: the loop over [begin, end)
      fn_ = inner;
      entry_block_ = llvm::BasicBlock::Create(ctx_, "entry", inner);
      b_.SetInsertPoint(entry_block_);
      vars_.clear();
      bufs_.clear();
      for (size_t i = 0; i < cbufs.size(); ++i) bufs_[cbufs[i].first] = inner->getArg(static_cast<unsigned>(i));
      for (size_t i = 0; i < cvars.size(); ++i) {
        llvm::Value* v = inner->getArg(static_cast<unsigned>(cbufs.size() + i));
        vars_[cvars[i].first] = var_types[i] == i64 ? v : b_.CreateTrunc(v, var_types[i]);
      }
      llvm::Value* begin = inner->getArg(static_cast<unsigned>(inner_args.size() - 2));
      llvm::Value* end = inner->getArg(static_cast<unsigned>(inner_args.size() - 1));
      llvm::Value* lo = scalar_index64(n.min, "a loop bound");
      in_parallel_ = true;
      serial_loop(n, b_.CreateAdd(lo, begin), b_.CreateAdd(lo, end));
      in_parallel_ = false;
      b_.CreateRetVoid();
    }

    fn_ = saved_fn;
    entry_block_ = saved_entry;
    vars_ = std::move(saved_vars);
    bufs_ = std::move(saved_bufs);
    addr_cache_ = std::move(saved_cache);
    b_.restoreIP(saved_ip);
    llvm::FunctionCallee rt =
        mod_.getOrInsertFunction("basin_parallel_for", llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, i64}, false));
    b_.CreateCall(rt, {outer, ctx_arr, extent});
  }

  void allocate(const StmtNode& n) {
    if (vec_) throw InternalError("an allocation of '" + n.buffer->name + "' inside a vectorized loop");
    const Buffer& buf = n.buffer;
    llvm::Value* count = b_.getInt64(1);
    int64_t const_count = 1;
    bool constant = true;
    for (const Expr& e : buf->shape) {
      int64_t v;
      if (is_const_int(e, &v)) const_count *= v;
      else constant = false;
      count = b_.CreateMul(count, scalar_index64(e, "a buffer extent"));
    }
    int64_t bytes = const_count * buf->dtype.bytes();
    llvm::Type* elem = mem_type(buf->dtype);
    if (buf->scope != MemScope::Global && constant && bytes <= 256 * 1024) {
      // Small local buffers live on the stack, allocated once in the entry block.
      llvm::IRBuilder<> eb(entry_block_, entry_block_->begin());
      llvm::AllocaInst* a = eb.CreateAlloca(elem, eb.getInt64(const_count), buf->name);
      a->setAlignment(llvm::Align(64));
      bufs_[buf.get()] = a;
      stmt(n.body[0]);
      bufs_.erase(buf.get());
      return;
    }
    llvm::Type* ptr = llvm::PointerType::get(ctx_, 0);
    llvm::FunctionCallee alloc = mod_.getOrInsertFunction(
        "aligned_alloc", llvm::FunctionType::get(ptr, {b_.getInt64Ty(), b_.getInt64Ty()}, false));
    llvm::FunctionCallee release =
        mod_.getOrInsertFunction("free", llvm::FunctionType::get(b_.getVoidTy(), {ptr}, false));
    llvm::Value* size = b_.CreateMul(count, b_.getInt64(buf->dtype.bytes()));
    size = b_.CreateAnd(b_.CreateAdd(size, b_.getInt64(64)), b_.getInt64(~int64_t{63}));  // a multiple of 64, > 0
    llvm::Value* p = b_.CreateCall(alloc, {b_.getInt64(64), size}, buf->name);
    bufs_[buf.get()] = p;
    stmt(n.body[0]);
    bufs_.erase(buf.get());
    b_.CreateCall(release, {p});
  }

  void stmt(const Stmt& s) {
    const StmtNode& n = *s;
    switch (n.kind) {
      case StmtKind::For:
        loop(n);
        return;
      case StmtKind::Allocate:
        allocate(n);
        return;
      case StmtKind::Store: {
        if (vec_) {
          vector_store(n);
          return;
        }
        llvm::Value* v = expr(n.value);
        if (n.buffer->dtype.is_bool()) v = b_.CreateZExt(v, b_.getInt8Ty());
        b_.CreateStore(v, address(n.buffer, n.indices));
        return;
      }
      case StmtKind::IfThenElse: {
        llvm::Value* c = expr(n.cond);
        if (is_vector(c)) {  // lane-varying: both sides run, their stores and loads masked
          masked(c, [&] {
            stmt(n.body[0]);
            return nullptr;
          });
          if (n.body.size() > 1)
            masked(b_.CreateNot(c), [&] {
              stmt(n.body[1]);
              return nullptr;
            });
          return;
        }
        llvm::BasicBlock* tb = llvm::BasicBlock::Create(ctx_, "if.then", fn_);
        llvm::BasicBlock* eb = llvm::BasicBlock::Create(ctx_, "if.else", fn_);
        llvm::BasicBlock* mb = llvm::BasicBlock::Create(ctx_, "if.end", fn_);
        b_.CreateCondBr(c, tb, eb);
        auto saved_cache = addr_cache_;
        b_.SetInsertPoint(tb);
        stmt(n.body[0]);
        addr_cache_ = saved_cache;
        b_.CreateBr(mb);
        b_.SetInsertPoint(eb);
        if (n.body.size() > 1) stmt(n.body[1]);
        addr_cache_ = std::move(saved_cache);
        b_.CreateBr(mb);
        b_.SetInsertPoint(mb);
        return;
      }
      case StmtKind::Seq:
        for (const Stmt& c : n.body) stmt(c);
        return;
      case StmtKind::Pragma: {
        if (n.key == kBf16DotPragma && bf16_dot_ && vec_ && !mask_ && bf16_dot(*n.body[0])) return;
        if (n.key == kAmxBf16Pragma && amx_bf16_ && !vec_ && !mask_ &&
            amx_nest(*n.body[0], starts_at_zero(n.pragma_value), false))
          return;
        if (n.key == kAmxInt8Pragma && amx_int8_ && !vec_ && !mask_ &&
            amx_nest(*n.body[0], starts_at_zero(n.pragma_value), true))
          return;
        if (n.key == kInt8DotPragma && (int8_dot_ || int8_madd_) && vec_ && !mask_ && int8_dot(*n.body[0])) return;
        const bool saved = loads_in_bounds_;
        if (n.key == kGuardedLoadsInBounds) loads_in_bounds_ = true;
        stmt(n.body[0]);
        loads_in_bounds_ = saved;
        return;
      }
      case StmtKind::Barrier:
        throw Error("the CPU backend cannot compile a GPU barrier");
    }
  }

  // A store of a pair of bfloat16 products, acc[I] = (acc[I] + a1 * b1) + a0 * b0 with
  // each factor f32(a bfloat16 load) and a1, b1 the elements after a0, b0
  // (core/ir/stmt.h, kBf16DotPragma): its accumulator's flat index and the loads a0, b0.
  struct DotStore {
    Expr flat_acc, a0, b0;
  };
  std::optional<DotStore> pair_store(const StmtNode& st) {
    if (st.kind != StmtKind::Store || st.buffer->dtype != DType::f32()) return std::nullopt;
    const Expr& v = st.value;
    auto is = [](const Expr& e, ExprKind k) { return e.defined() && e.kind() == k; };
    if (!is(v, ExprKind::Add) || !is(v.arg(0), ExprKind::Add) || !is(v.arg(1), ExprKind::Mul) ||
        !is(v.arg(0).arg(1), ExprKind::Mul))
      return std::nullopt;
    const Expr& old = v.arg(0).arg(0);
    if (!is(old, ExprKind::Load) || old->buffer != st.buffer) return std::nullopt;
    DotStore p;
    p.flat_acc = flat_expr(st.buffer, st.indices);
    if (!structural_equal(flat_expr(old->buffer, old->args), p.flat_acc)) return std::nullopt;
    // The bf16 load under a product's factor.
    auto operand = [&](const Expr& prod, int i) -> Expr {
      const Expr& c = prod.arg(static_cast<size_t>(i));
      if (!is(c, ExprKind::Cast) || !is(c.arg(0), ExprKind::Load) || !c.arg(0).dtype().is_bf16()) return Expr();
      return c.arg(0);
    };
    Expr a1 = operand(v.arg(0).arg(1), 0), b1 = operand(v.arg(0).arg(1), 1);
    p.a0 = operand(v.arg(1), 0);
    p.b0 = operand(v.arg(1), 1);
    if (!p.a0.defined() || !a1.defined() || !p.b0.defined() || !b1.defined()) return std::nullopt;
    if (p.a0->buffer != a1->buffer || p.b0->buffer != b1->buffer) return std::nullopt;
    Analyzer an;
    auto next = [&](const Expr& x0, const Expr& x1) {
      int64_t d;
      return is_const_int(an.simplify(x1 - x0), &d) && d == 1;
    };
    if (!next(flat_expr(p.a0->buffer, p.a0->args), flat_expr(a1->buffer, a1->args)) ||
        !next(flat_expr(p.b0->buffer, p.b0->args), flat_expr(b1->buffer, b1->args)))
      return std::nullopt;
    return p;
  }

  // A nest under kAmxBf16Pragma (core/ir/stmt.h) as AMX-BF16 tiles, or with `int8` one
  // under kAmxInt8Pragma as AMX-INT8 tiles: the TM x TN accumulator tiles loaded, the kb
  // loop's steps each TM A tiles, TN B tiles and TM x TN tdpbf16ps (tdpbusd) on tile
  // registers (the accumulators carried by phis), the tiles stored back. Loops of one iteration may have been dropped
  // (kb, tm, tn). With `from_zero` the accumulators start as tilezero (the pragma says acc holds zeros). False, with
  // nothing emitted, where the nest is not of that form (the caller emits it as written).
  static bool starts_at_zero(const Expr& value) {
    int64_t v = 1;
    return is_const_int(value, &v) && v == 0;
  }
  bool amx_nest(const StmtNode& top, bool from_zero, bool int8) {
    std::map<std::string, const StmtNode*> loops;
    const StmtNode* n = &top;
    while (n->kind == StmtKind::For || n->kind == StmtKind::Pragma) {
      if (n->kind == StmtKind::For) {
        int64_t lo = -1;
        if (!is_const_int(n->min, &lo) || lo != 0 || !is_const_int(n->extent, nullptr)) return false;
        loops[n->var.name()] = n;
      }
      n = n->body[0].get();
    }
    if (n->kind != StmtKind::Store) return false;
    // A dropped loop had one iteration.
    auto extent = [&](const char* name) {
      int64_t e = 1;
      if (auto it = loops.find(name); it != loops.end()) is_const_int(it->second->extent, &e);
      return e;
    };
    if (loops.size() != 3 + loops.count("amx.kb") + loops.count("amx.tm") + loops.count("amx.tn")) return false;
    if (extent("amx.kp") != 16 || extent("amx.r") != 16 || extent("amx.c") != 16) return false;
    const int64_t KB = extent("amx.kb"), TM = extent("amx.tm"), TN = extent("amx.tn");
    if (TM * TN + TM + TN > 8) return false;
    std::optional<DotStore> ps = int8 ? quad_store(*n) : pair_store(*n);
    if (!ps) return false;
    const Expr& flat_acc = ps->flat_acc;
    const Expr &a0 = ps->a0, &b0 = ps->b0;
    // A group's elements (2 bfloat16, 4 bytes) and an element's bytes.
    const int64_t group = int8 ? 4 : 2, bytes = int8 ? 1 : 2;
    const Expr fa0 = flat_expr(a0->buffer, a0->args), fb0 = flat_expr(b0->buffer, b0->args);
    // Each index linear in kp, r and c (no other term uses them): their coefficients.
    const Var kp = loops["amx.kp"]->var, r = loops["amx.r"]->var, c = loops["amx.c"]->var;
    auto coefs = [&](const Expr& flat, int64_t* ckp, int64_t* cr, int64_t* cc) {
      *ckp = *cr = *cc = 0;
      for (const auto& [atom, coef] : linear(flat).terms) {
        if (atom.kind() == ExprKind::Var) {
          const int64_t id = Var(atom).id();
          if (id == kp.id()) *ckp += coef;
          else if (id == r.id()) *cr += coef;
          else if (id == c.id()) *cc += coef;
          continue;
        }
        if (uses_var(atom, kp) || uses_var(atom, r) || uses_var(atom, c)) return false;
      }
      return true;
    };
    int64_t akp, ar, ac, bkp, br, bc, ckp, cr, cc;
    if (!coefs(fa0, &akp, &ar, &ac) || !coefs(fb0, &bkp, &br, &bc) || !coefs(flat_acc, &ckp, &cr, &cc)) return false;
    // A's rows may overlap (a first convolution's rows, 6 elements apart, each 32 long);
    // B's and the accumulators' may not.
    if (akp != group || ac != 0 || ar < 1 || bc != group || br != 0 || bkp < 16 * group || cc != 1 || ckp != 0 ||
        cr < 16)
      return false;
    const Var* kbv = loops.count("amx.kb") ? &loops["amx.kb"]->var : nullptr;
    if (kbv && uses_var(flat_acc, *kbv)) return false;

    // The address of `buf` at `idx` with the tile loops at (kb, tm, tn) and kp = r = c = 0.
    auto bind = [&](const char* name, llvm::Value* value) {
      auto it = loops.find(name);
      if (it != loops.end()) vars_[it->second->var.id()] = as_var_type(it->second->var, value);
    };
    auto unbind = [&]() {
      for (const auto& [name, loop] : loops) vars_.erase(loop->var.id());
    };
    auto tile_ptr = [&](const Buffer& buf, const std::vector<Expr>& idx, llvm::Value* kb, int64_t tm, int64_t tn) {
      bind("amx.kp", b_.getInt64(0));
      bind("amx.r", b_.getInt64(0));
      bind("amx.c", b_.getInt64(0));
      bind("amx.tm", b_.getInt64(tm));
      bind("amx.tn", b_.getInt64(tn));
      if (kb) bind("amx.kb", kb);
      llvm::Value* p = address(buf, idx);
      unbind();
      return p;
    };
    llvm::Type* amx = llvm::Type::getX86_AMXTy(ctx_);
    llvm::Function* load_fn = llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::x86_tileloadd64_internal);
    llvm::Function* store_fn = llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::x86_tilestored64_internal);
    llvm::Function* dp_fn = llvm::Intrinsic::getDeclaration(
        &mod_, int8 ? llvm::Intrinsic::x86_tdpbusd_internal : llvm::Intrinsic::x86_tdpbf16ps_internal);
    llvm::Function* zero_fn = llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::x86_tilezero_internal);
    llvm::Value* rows = b_.getInt16(16);
    llvm::Value* colsb = b_.getInt16(64);
    llvm::Value* c_stride = b_.getInt64(cr * 4);
    std::vector<llvm::Value*> c_ptr, acc_tiles;
    for (int64_t i = 0; i < TM; ++i)
      for (int64_t j = 0; j < TN; ++j) {
        c_ptr.push_back(tile_ptr(n->buffer, n->indices, b_.getInt64(0), i, j));
        acc_tiles.push_back(from_zero ? b_.CreateCall(zero_fn, {rows, colsb})
                                      : b_.CreateCall(load_fn, {rows, colsb, c_ptr.back(), c_stride}));
      }
    // The kb loop, entered once (KB >= 1), the accumulators carried by phis.
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, "amx.kb.body", fn_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "amx.kb.exit", fn_);
    b_.CreateBr(body);
    b_.SetInsertPoint(body);
    llvm::PHINode* kb = b_.CreatePHI(b_.getInt64Ty(), 2, "amx.kb");
    kb->addIncoming(b_.getInt64(0), pre);
    std::vector<llvm::PHINode*> phis;
    for (llvm::Value* t : acc_tiles) {
      phis.push_back(b_.CreatePHI(amx, 2));
      phis.back()->addIncoming(t, pre);
    }
    auto saved_cache = addr_cache_;
    std::vector<llvm::Value*> a_tiles, b_tiles;
    for (int64_t i = 0; i < TM; ++i)
      a_tiles.push_back(
          b_.CreateCall(load_fn, {rows, colsb, tile_ptr(a0->buffer, a0->args, kb, i, 0), b_.getInt64(ar * bytes)}));
    for (int64_t j = 0; j < TN; ++j)
      b_tiles.push_back(
          b_.CreateCall(load_fn, {rows, colsb, tile_ptr(b0->buffer, b0->args, kb, 0, j), b_.getInt64(bkp * bytes)}));
    std::vector<llvm::Value*> next_tiles;
    for (int64_t i = 0; i < TM; ++i)
      for (int64_t j = 0; j < TN; ++j)
        next_tiles.push_back(b_.CreateCall(dp_fn, {rows, colsb, colsb, phis[static_cast<size_t>(i * TN + j)],
                                                   a_tiles[static_cast<size_t>(i)], b_tiles[static_cast<size_t>(j)]}));
    addr_cache_ = std::move(saved_cache);
    llvm::Value* kb_next = b_.CreateAdd(kb, b_.getInt64(1), "", /*HasNUW=*/true, /*HasNSW=*/true);
    llvm::BasicBlock* latch = b_.GetInsertBlock();
    kb->addIncoming(kb_next, latch);
    for (size_t t = 0; t < phis.size(); ++t) phis[t]->addIncoming(next_tiles[t], latch);
    b_.CreateCondBr(b_.CreateICmpSLT(kb_next, b_.getInt64(KB)), body, exit);
    b_.SetInsertPoint(exit);
    for (size_t t = 0; t < next_tiles.size(); ++t)
      b_.CreateCall(store_fn, {rows, colsb, c_ptr[t], c_stride, next_tiles[t]});
    return true;
  }

  // A store under kBf16DotPragma, acc[I] = (acc[I] + a1 * b1) + a0 * b0 (core/ir/stmt.h),
  // as vdpbf16ps on chunks of 16, 8 or 4 lanes: a's pair one 32-bit load broadcast to
  // every lane, b's pairs one vector load of 2 x lanes bfloat16. False, with nothing
  // emitted, where the store is not of that form (the caller emits it as written).
  bool bf16_dot(const StmtNode& st) {
    const int lanes = vec_->lanes;
    const int chunk = lanes % 16 == 0 ? 16 : lanes % 8 == 0 ? 8 : lanes % 4 == 0 ? 4 : 0;
    if (chunk == 0) return false;
    std::optional<DotStore> ps = pair_store(st);
    if (!ps) return false;
    const Expr &a0 = ps->a0, &b0 = ps->b0;
    Affine aa = affine(flat_expr(a0->buffer, a0->args)), ab = affine(flat_expr(b0->buffer, b0->args)),
           ac = affine(ps->flat_acc);
    if (!aa.affine_in_vec || aa.vec_coef != 0 || !ab.affine_in_vec || ab.vec_coef != 2 || !ac.affine_in_vec ||
        ac.vec_coef != 1)
      return false;

    llvm::Type* f32 = b_.getFloatTy();
    llvm::Type* bf = b_.getBFloatTy();
    llvm::Value* acc_ptr = lane0_ptr(st.buffer, ac);
    auto* acc_ty = llvm::FixedVectorType::get(f32, static_cast<unsigned>(lanes));
    llvm::Value* accv = b_.CreateAlignedLoad(acc_ty, acc_ptr, llvm::Align(4));
    llvm::Value* pair =
        b_.CreateAlignedLoad(b_.getInt32Ty(), element_ptr(a0->buffer, aa.base, aa.offset), llvm::Align(2));
    auto* pair_ty = llvm::FixedVectorType::get(bf, static_cast<unsigned>(2 * chunk));
    llvm::Value* av = b_.CreateBitCast(b_.CreateVectorSplat(static_cast<unsigned>(chunk), pair), pair_ty);
    llvm::Value* b_ptr = lane0_ptr(b0->buffer, ab);
    const llvm::Intrinsic::ID id = chunk == 16  ? llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512
                                   : chunk == 8 ? llvm::Intrinsic::x86_avx512bf16_dpbf16ps_256
                                                : llvm::Intrinsic::x86_avx512bf16_dpbf16ps_128;
    llvm::Function* dp = llvm::Intrinsic::getDeclaration(&mod_, id);
    llvm::Value* result = by_chunks(accv, lanes, chunk, [&](int c, llvm::Value* acc_c) {
      llvm::Value* bp = b_.CreateInBoundsGEP(b_.getInt16Ty(), b_ptr, b_.getInt64(2 * chunk * c));
      return b_.CreateCall(dp, {acc_c, av, b_.CreateAlignedLoad(pair_ty, bp, llvm::Align(2))});
    });
    b_.CreateAlignedStore(result, acc_ptr, llvm::Align(4));
    return true;
  }

  // A store under kInt8DotPragma, acc[I] = acc[I] + p0 + p1 + p2 + p3 (in any order) with
  // pq = i32(a[i + q]) * i32(b[j + q]) (core/ir/stmt.h): its accumulator's flat index and
  // the loads a[i] (uint8) and b[j] (int8) of the group's first product.
  std::optional<DotStore> quad_store(const StmtNode& st) {
    if (st.kind != StmtKind::Store || st.buffer->dtype != DType::i32()) return std::nullopt;
    auto is = [](const Expr& e, ExprKind k) { return e.defined() && e.kind() == k; };
    // The sum's terms, in any order and association (the simplifier reorders integer
    // sums): the accumulator's old value and four products of a widened uint8 load by a
    // widened int8 load, either side first.
    std::vector<Expr> terms, pending = {st.value};
    while (!pending.empty()) {
      Expr e = pending.back();
      pending.pop_back();
      if (is(e, ExprKind::Add)) {
        pending.push_back(e.arg(0));
        pending.push_back(e.arg(1));
      } else {
        terms.push_back(e);
      }
    }
    if (terms.size() != 5) return std::nullopt;
    Expr flat_acc = flat_expr(st.buffer, st.indices);
    Expr old;
    std::vector<std::pair<Expr, Expr>> products;  // (uint8 load, int8 load)
    for (const Expr& t : terms) {
      if (is(t, ExprKind::Load) && t->buffer == st.buffer) {
        if (old.defined() || !structural_equal(flat_expr(t->buffer, t->args), flat_acc)) return std::nullopt;
        old = t;
        continue;
      }
      if (!is(t, ExprKind::Mul)) return std::nullopt;
      Expr u, s8;
      for (int i = 0; i < 2; ++i) {
        const Expr& c = t.arg(static_cast<size_t>(i));
        if (!is(c, ExprKind::Cast) || c.dtype() != DType::i32() || !is(c.arg(0), ExprKind::Load)) return std::nullopt;
        (c.arg(0).dtype() == DType::u8() ? u : s8) = c.arg(0);
      }
      if (!u.defined() || !s8.defined() || s8.dtype() != DType::i8()) return std::nullopt;
      products.push_back({u, s8});
    }
    if (!old.defined() || products.size() != 4) return std::nullopt;
    // Both operands of each product at one offset from the first product's, the offsets
    // four consecutive ones: the group starts at the least.
    Analyzer an;
    auto flat = [&](const Expr& l) { return flat_expr(l->buffer, l->args); };
    const Expr fa_any = flat(products[0].first), fb_any = flat(products[0].second);
    std::vector<int64_t> offsets;
    for (const auto& [u, s8] : products) {
      int64_t da = 0, db = 0;
      if (u->buffer != products[0].first->buffer || s8->buffer != products[0].second->buffer ||
          !is_const_int(an.simplify(flat(u) - fa_any), &da) || !is_const_int(an.simplify(flat(s8) - fb_any), &db) ||
          da != db)
        return std::nullopt;
      offsets.push_back(da);
    }
    const auto least = std::min_element(offsets.begin(), offsets.end());
    std::vector<bool> seen(4, false);
    for (int64_t d : offsets) {
      const int64_t q = d - *least;
      if (q > 3 || seen[static_cast<size_t>(q)]) return std::nullopt;
      seen[static_cast<size_t>(q)] = true;
    }
    const auto& [a_load, b_load] = products[static_cast<size_t>(least - offsets.begin())];
    return DotStore{flat_acc, a_load, b_load};
  }

  // A store under kInt8DotPragma (quad_store) as vpdpbusd on chunks of 16, 8 or 4 lanes
  // (at most int8_dot_): a's group one 32-bit load broadcast to every lane, b's groups one
  // vector load of 4 x lanes bytes. False, with nothing emitted, where the store is not of
  // that form (the caller emits it as written).
  bool int8_dot(const StmtNode& st) {
    const int lanes = vec_->lanes;
    const int widest = int8_dot_ ? int8_dot_ : int8_madd_;
    int chunk = 0;
    for (int c : {16, 8, 4})
      if (c <= widest && lanes % c == 0) {
        chunk = c;
        break;
      }
    if (chunk == 0) return false;
    std::optional<DotStore> qs = quad_store(st);
    if (!qs) return false;
    const Expr &a_load = qs->a0, &b_load = qs->b0, &flat_acc = qs->flat_acc;
    auto flat = [&](const Expr& l) { return flat_expr(l->buffer, l->args); };
    Affine aa = affine(flat(a_load)), ab = affine(flat(b_load)), ac = affine(flat_acc);
    if (!aa.affine_in_vec || aa.vec_coef != 0 || !ab.affine_in_vec || ab.vec_coef != 4 || !ac.affine_in_vec ||
        ac.vec_coef != 1)
      return false;

    llvm::Type* i32 = b_.getInt32Ty();
    llvm::Value* acc_ptr = lane0_ptr(st.buffer, ac);
    auto* acc_ty = llvm::FixedVectorType::get(i32, static_cast<unsigned>(lanes));
    auto* chunk_ty = llvm::FixedVectorType::get(i32, static_cast<unsigned>(chunk));
    llvm::Value* accv = b_.CreateAlignedLoad(acc_ty, acc_ptr, llvm::Align(4));
    llvm::Value* group = b_.CreateAlignedLoad(i32, element_ptr(a_load->buffer, aa.base, aa.offset), llvm::Align(1));
    llvm::Value* b_ptr = lane0_ptr(b_load->buffer, ab);
    const llvm::Intrinsic::ID id = chunk == 16  ? llvm::Intrinsic::x86_avx512_vpdpbusd_512
                                   : chunk == 8 ? llvm::Intrinsic::x86_avx512_vpdpbusd_256
                                                : llvm::Intrinsic::x86_avx512_vpdpbusd_128;
    llvm::Value* av = int8_dot_ ? b_.CreateVectorSplat(static_cast<unsigned>(chunk), group) : nullptr;
    llvm::Value* result = by_chunks(accv, lanes, chunk, [&](int c, llvm::Value* acc_c) -> llvm::Value* {
      llvm::Value* bp = b_.CreateInBoundsGEP(b_.getInt8Ty(), b_ptr, b_.getInt64(4 * chunk * c));
      if (!int8_dot_) return madd_group(acc_c, group, bp, chunk);
      return b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, id),
                           {acc_c, av, b_.CreateAlignedLoad(chunk_ty, bp, llvm::Align(1))});
    });
    b_.CreateAlignedStore(result, acc_ptr, llvm::Align(4));
    return true;
  }

  // Without vpdpbusd: acc (chunk int32 lanes) plus, per lane l, the four products of the
  // group's unsigned bytes (`group`, an i32 of 4 bytes) by the signed bytes at
  // b[4l .. 4l + 3]: both widened to 16 bits (exact), vpmaddwd sums each pair of products
  // into 32 bits (half the lanes per instruction), and the pairs' sums are added.
  llvm::Value* madd_group(llvm::Value* acc, llvm::Value* group, llvm::Value* b_ptr, int chunk) {
    llvm::Type* i16 = b_.getInt16Ty();
    auto* bytes_ty = llvm::FixedVectorType::get(b_.getInt8Ty(), static_cast<unsigned>(4 * chunk));
    llvm::Value* bw = b_.CreateSExt(b_.CreateAlignedLoad(bytes_ty, b_ptr, llvm::Align(1)),
                                    llvm::FixedVectorType::get(i16, static_cast<unsigned>(4 * chunk)));
    llvm::Value* a4 = b_.CreateZExt(b_.CreateBitCast(group, llvm::FixedVectorType::get(b_.getInt8Ty(), 4)),
                                    llvm::FixedVectorType::get(i16, 4));
    const int half = 2 * chunk;  // 16-bit elements per vpmaddwd
    std::vector<int> rep;
    for (int e = 0; e < half; ++e) rep.push_back(e % 4);
    llvm::Value* ar = b_.CreateShuffleVector(a4, rep);
    const llvm::Intrinsic::ID id = chunk == 16  ? llvm::Intrinsic::x86_avx512_pmaddw_d_512
                                   : chunk == 8 ? llvm::Intrinsic::x86_avx2_pmadd_wd
                                                : llvm::Intrinsic::x86_sse2_pmadd_wd;
    llvm::Function* madd = llvm::Intrinsic::getDeclaration(&mod_, id);
    std::vector<int> lo, hi, even, odd;
    for (int e = 0; e < half; ++e) {
      lo.push_back(e);
      hi.push_back(half + e);
    }
    llvm::Value* p0 = b_.CreateCall(madd, {ar, b_.CreateShuffleVector(bw, lo)});
    llvm::Value* p1 = b_.CreateCall(madd, {ar, b_.CreateShuffleVector(bw, hi)});
    // p0 then p1 hold lane l's two sums at 2l and 2l + 1.
    for (int l = 0; l < chunk; ++l) {
      even.push_back(2 * l);
      odd.push_back(2 * l + 1);
    }
    return b_.CreateAdd(acc, b_.CreateAdd(b_.CreateShuffleVector(p0, p1, even), b_.CreateShuffleVector(p0, p1, odd)));
  }

  // accv (`lanes` lanes) in chunks of `chunk` lanes, each chunk c replaced by
  // f(c, its lanes), the results side by side again: the first w lanes, then the next
  // chunk's (the chunk widened to w lanes first, so that both shuffle operands have one
  // type).
  llvm::Value* by_chunks(llvm::Value* accv, int lanes, int chunk,
                         const std::function<llvm::Value*(int, llvm::Value*)>& f) {
    std::vector<llvm::Value*> parts;
    for (int c = 0; c < lanes / chunk; ++c) {
      llvm::Value* acc_c = accv;
      if (chunk != lanes) {
        std::vector<int> m;
        for (int l = 0; l < chunk; ++l) m.push_back(c * chunk + l);
        acc_c = b_.CreateShuffleVector(accv, m);
      }
      parts.push_back(f(c, acc_c));
    }
    llvm::Value* result = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) {
      const int w = chunk * static_cast<int>(i);
      std::vector<int> widen, join;
      for (int l = 0; l < w; ++l) widen.push_back(l < chunk ? l : -1);
      llvm::Value* next = w == chunk ? parts[i] : b_.CreateShuffleVector(parts[i], widen);
      for (int l = 0; l < w + chunk; ++l) join.push_back(l < w ? l : w + (l - w));
      result = b_.CreateShuffleVector(result, next, join);
    }
    return result;
  }

  struct VecLoop {
    Var var;
    int lanes;
    llvm::Value* lo;  // the scalar first lane
  };

  llvm::LLVMContext& ctx_;
  llvm::Module& mod_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_block_ = nullptr;
  std::unordered_map<int64_t, llvm::Value*> vars_;
  std::unordered_map<const BufferNode*, llvm::Value*> bufs_;
  std::optional<VecLoop> vec_;    // the vectorized loop being emitted
  llvm::Value* mask_ = nullptr;   // lanes enabled where a vector load sits (null: all)
  bool loads_in_bounds_ = false;  // inside the pragma kGuardedLoadsInBounds
  bool in_parallel_ = false;      // inside an outlined parallel body
  // Stores under kBf16DotPragma as vdpbf16ps: the JIT's target is this CPU, which has
  // AVX512-BF16 (HostInfo::bf16_dot); otherwise they are emitted as written.
  bool bf16_dot_ = false;
  // Nests under kAmxBf16Pragma as AMX-BF16 tiles (HostInfo::amx_bf16, LlvmOptions::amx_tiles).
  bool amx_bf16_ = false;
  // Nests under kAmxInt8Pragma as AMX-INT8 tiles (HostInfo::amx_int8, LlvmOptions::amx_tiles).
  bool amx_int8_ = false;
  // Stores under kInt8DotPragma as vpdpbusd of at most this many lanes (16 with
  // AVX512-VNNI, 8 with AVX-VNNI; HostInfo::int8_dot); 0: none.
  int int8_dot_ = 0;
  // Without it, as vpmaddwd on 16-bit values of at most this many lanes (16 with
  // AVX-512, 8 with AVX2); 0: emitted as written.
  int int8_madd_ = 0;
  int outlined_ = 0;
  std::unordered_map<const ExprNode*, std::pair<Expr, LinearForm>> linear_memo_;
  std::map<std::vector<uintptr_t>, llvm::Value*> addr_cache_;  // bases valid at the insertion point
};

}  // namespace

std::unique_ptr<llvm::Module> emit_llvm_module(const LoweredFunc& f, llvm::LLVMContext& ctx, const LlvmOptions& opt,
                                               const std::string& entry_name) {
  auto mod = std::make_unique<llvm::Module>(f.name, ctx);
  Emitter(ctx, *mod, opt).emit(f, entry_name);
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*mod, &os)) {
    os.flush();
    throw InternalError("LLVM rejected the module emitted for '" + f.name + "': " + err + "\n" + to_string(f));
  }
  return mod;
}

}  // namespace basin::codegen
