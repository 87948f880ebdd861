// Loop IR to LLVM IR. Loops become header/body/latch blocks with a phi for the
// induction variable; Select and short-circuit logic whose operands could fault
// (loads, integer division) become branches, as the IR's lazy semantics require;
// everything else maps one to one.
#include "codegen/llvm_emit.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <unordered_map>

#include "core/util/error.h"

namespace basin::codegen {

namespace {

// True if evaluating e could fault (a load, or an integer division by a non-constant).
bool may_fault(const Expr& e) {
  bool fault = false;
  post_order_visit(e, [&](const Expr& x) {
    if (x.kind() == ExprKind::Load) fault = true;
    if ((x.kind() == ExprKind::Div || x.kind() == ExprKind::FloorDiv || x.kind() == ExprKind::FloorMod) &&
        x.dtype().is_int() && !is_const(x.arg(1)))
      fault = true;
  });
  return fault;
}

class Emitter {
 public:
  Emitter(llvm::LLVMContext& ctx, llvm::Module& mod, const LlvmOptions& opt) : ctx_(ctx), mod_(mod), b_(ctx) {
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
    BASIN_CHECK(t.is_scalar()) << "vector types reach the LLVM backend with the CPU sketches";
    if (t.is_bool()) return b_.getInt1Ty();
    if (t.is_float()) return t.bits == 32 ? b_.getFloatTy() : b_.getDoubleTy();
    return b_.getIntNTy(t.bits);
  }
  llvm::Type* mem_type(DType t) { return t.is_bool() ? b_.getInt8Ty() : reg_type(t); }

  llvm::Value* index64(const Expr& e) {
    llvm::Value* v = expr(e);
    return v->getType() == b_.getInt64Ty() ? v : b_.CreateSExt(v, b_.getInt64Ty());
  }

  llvm::Value* flat_index(const Buffer& buf, const std::vector<Expr>& idx) {
    if (idx.size() == 1) return index64(idx[0]);
    if (idx.empty()) return b_.getInt64(0);
    Expr flat = idx[0];
    for (size_t i = 1; i < idx.size(); ++i) flat = flat * buf->shape[i] + idx[i];
    return index64(flat);
  }

  llvm::Value* address(const Buffer& buf, const std::vector<Expr>& idx) {
    auto it = bufs_.find(buf.get());
    BASIN_CHECK(it != bufs_.end()) << "buffer " << buf->name << " is neither a parameter nor allocated";
    return b_.CreateInBoundsGEP(mem_type(buf->dtype), it->second, flat_index(buf, idx));
  }

  // A value computed on one of two paths, joined by a phi.
  template <typename T, typename F>
  llvm::Value* branch(llvm::Value* cond, T then_fn, F else_fn, const char* name) {
    llvm::BasicBlock* tb = llvm::BasicBlock::Create(ctx_, std::string(name) + ".then", fn_);
    llvm::BasicBlock* fb = llvm::BasicBlock::Create(ctx_, std::string(name) + ".else", fn_);
    llvm::BasicBlock* mb = llvm::BasicBlock::Create(ctx_, std::string(name) + ".end", fn_);
    b_.CreateCondBr(cond, tb, fb);
    b_.SetInsertPoint(tb);
    llvm::Value* tv = then_fn();
    llvm::BasicBlock* tend = b_.GetInsertBlock();
    b_.CreateBr(mb);
    b_.SetInsertPoint(fb);
    llvm::Value* fv = else_fn();
    llvm::BasicBlock* fend = b_.GetInsertBlock();
    b_.CreateBr(mb);
    b_.SetInsertPoint(mb);
    llvm::PHINode* phi = b_.CreatePHI(tv->getType(), 2);
    phi->addIncoming(tv, tend);
    phi->addIncoming(fv, fend);
    return phi;
  }

  llvm::Value* math(MathFn f, DType t, const std::vector<llvm::Value*>& a) {
    llvm::Type* ty = reg_type(t);
    auto intrinsic = [&](llvm::Intrinsic::ID id) {
      return b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, id, {ty}), a);
    };
    auto libm = [&](const char* name) {
      std::string n = t.bits == 32 ? std::string(name) + "f" : name;
      std::vector<llvm::Type*> types(a.size(), ty);
      llvm::FunctionCallee c = mod_.getOrInsertFunction(n, llvm::FunctionType::get(ty, types, false));
      if (auto* fn = llvm::dyn_cast<llvm::Function>(c.getCallee())) {
        fn->setDoesNotThrow();
        fn->setDoesNotAccessMemory();
      }
      return b_.CreateCall(c, a);
    };
    llvm::Value* one = llvm::ConstantFP::get(ty, 1.0);
    switch (f) {
      case MathFn::exp: return intrinsic(llvm::Intrinsic::exp);
      case MathFn::log: return intrinsic(llvm::Intrinsic::log);
      case MathFn::sqrt: return intrinsic(llvm::Intrinsic::sqrt);
      case MathFn::rsqrt: return b_.CreateFDiv(one, intrinsic(llvm::Intrinsic::sqrt));
      case MathFn::pow: return intrinsic(llvm::Intrinsic::pow);
      case MathFn::sigmoid: {
        llvm::Value* e = b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::exp, {ty}),
                                       {b_.CreateFNeg(a[0])});
        return b_.CreateFDiv(one, b_.CreateFAdd(one, e));
      }
      case MathFn::tanh: return libm("tanh");
      case MathFn::erf: return libm("erf");
      case MathFn::fabs: return intrinsic(llvm::Intrinsic::fabs);
      case MathFn::floor: return intrinsic(llvm::Intrinsic::floor);
      case MathFn::ceil: return intrinsic(llvm::Intrinsic::ceil);
    }
    return a[0];
  }

  llvm::Value* int_binary(ExprKind k, llvm::Value* x, llvm::Value* y) {
    switch (k) {
      case ExprKind::Add: return b_.CreateAdd(x, y);
      case ExprKind::Sub: return b_.CreateSub(x, y);
      case ExprKind::Mul: return b_.CreateMul(x, y);
      case ExprKind::Div: return b_.CreateSDiv(x, y);
      case ExprKind::FloorDiv: {
        llvm::Value* q = b_.CreateSDiv(x, y);
        llvm::Value* r = b_.CreateSRem(x, y);
        llvm::Value* zero = llvm::ConstantInt::get(x->getType(), 0);
        llvm::Value* adjust = b_.CreateAnd(b_.CreateICmpNE(r, zero),
                                           b_.CreateICmpNE(b_.CreateICmpSLT(r, zero), b_.CreateICmpSLT(y, zero)));
        return b_.CreateSub(q, b_.CreateZExt(adjust, x->getType()));
      }
      case ExprKind::FloorMod: {
        llvm::Value* r = b_.CreateSRem(x, y);
        llvm::Value* zero = llvm::ConstantInt::get(x->getType(), 0);
        llvm::Value* adjust = b_.CreateAnd(b_.CreateICmpNE(r, zero),
                                           b_.CreateICmpNE(b_.CreateICmpSLT(r, zero), b_.CreateICmpSLT(y, zero)));
        return b_.CreateSelect(adjust, b_.CreateAdd(r, y), r);
      }
      case ExprKind::Min: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, y);
      case ExprKind::Max: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, y);
      default: break;
    }
    BASIN_CHECK(false) << "integer " << kind_name(k);
    return nullptr;
  }

  llvm::Value* float_binary(ExprKind k, llvm::Value* x, llvm::Value* y) {
    switch (k) {
      case ExprKind::Add: return b_.CreateFAdd(x, y);
      case ExprKind::Sub: return b_.CreateFSub(x, y);
      case ExprKind::Mul: return b_.CreateFMul(x, y);
      case ExprKind::Div: return b_.CreateFDiv(x, y);
      case ExprKind::Min: return b_.CreateMinNum(x, y);
      case ExprKind::Max: return b_.CreateMaxNum(x, y);
      default: break;
    }
    BASIN_CHECK(false) << "float " << kind_name(k);
    return nullptr;
  }

  llvm::Value* compare(ExprKind k, DType t, llvm::Value* x, llvm::Value* y) {
    if (t.is_float()) {
      switch (k) {
        case ExprKind::EQ: return b_.CreateFCmpOEQ(x, y);
        case ExprKind::NE: return b_.CreateFCmpUNE(x, y);
        case ExprKind::LT: return b_.CreateFCmpOLT(x, y);
        case ExprKind::LE: return b_.CreateFCmpOLE(x, y);
        case ExprKind::GT: return b_.CreateFCmpOGT(x, y);
        default: return b_.CreateFCmpOGE(x, y);
      }
    }
    switch (k) {
      case ExprKind::EQ: return b_.CreateICmpEQ(x, y);
      case ExprKind::NE: return b_.CreateICmpNE(x, y);
      case ExprKind::LT: return b_.CreateICmpSLT(x, y);
      case ExprKind::LE: return b_.CreateICmpSLE(x, y);
      case ExprKind::GT: return b_.CreateICmpSGT(x, y);
      default: return b_.CreateICmpSGE(x, y);
    }
  }

  llvm::Value* cast(DType to, DType from, llvm::Value* v) {
    llvm::Type* ty = reg_type(to);
    if (to == from) return v;
    if (to.is_bool()) {
      return from.is_float() ? b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
                             : b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    }
    if (to.is_float()) {
      if (from.is_float()) return b_.CreateFPCast(v, ty);
      return from.is_bool() ? b_.CreateUIToFP(v, ty) : b_.CreateSIToFP(v, ty);
    }
    if (from.is_float()) return b_.CreateFPToSI(v, ty);
    return from.is_bool() ? b_.CreateZExt(v, ty) : b_.CreateSExtOrTrunc(v, ty);
  }

  llvm::Value* expr(const Expr& e) {
    const ExprNode& n = *e;
    switch (n.kind) {
      case ExprKind::IntImm:
        return llvm::ConstantInt::get(reg_type(n.dtype), static_cast<uint64_t>(n.ival), true);
      case ExprKind::FloatImm: return llvm::ConstantFP::get(reg_type(n.dtype), n.fval);
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
        llvm::Value* x = expr(n.args[0]);
        llvm::Value* y = expr(n.args[1]);
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
        return compare(n.kind, n.args[0].dtype(), x, y);
      }
      case ExprKind::And:
      case ExprKind::Or: {
        bool is_and = n.kind == ExprKind::And;
        llvm::Value* x = expr(n.args[0]);
        if (!may_fault(n.args[1])) {
          llvm::Value* y = expr(n.args[1]);
          return is_and ? b_.CreateAnd(x, y) : b_.CreateOr(x, y);
        }
        const Expr& rhs = n.args[1];
        if (is_and) return branch(x, [&] { return expr(rhs); }, [&] { return b_.getFalse(); }, "and");
        return branch(x, [&] { return b_.getTrue(); }, [&] { return expr(rhs); }, "or");
      }
      case ExprKind::Not: return b_.CreateNot(expr(n.args[0]));
      case ExprKind::Select: {
        llvm::Value* c = expr(n.args[0]);
        if (!may_fault(n.args[1]) && !may_fault(n.args[2])) {
          llvm::Value* t = expr(n.args[1]);
          llvm::Value* f = expr(n.args[2]);
          return b_.CreateSelect(c, t, f);
        }
        return branch(c, [&] { return expr(n.args[1]); }, [&] { return expr(n.args[2]); }, "select");
      }
      case ExprKind::Cast: return cast(n.dtype, n.args[0].dtype(), expr(n.args[0]));
      case ExprKind::Call: {
        std::vector<llvm::Value*> a;
        for (const Expr& x : n.args) a.push_back(expr(x));
        return math(n.fn, n.dtype, a);
      }
      case ExprKind::Load: {
        llvm::Value* v = b_.CreateLoad(mem_type(n.dtype), address(n.buffer, n.args));
        return n.dtype.is_bool() ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
      }
    }
    return nullptr;
  }

  void loop(const StmtNode& n) {
    llvm::Value* lo = index64(n.min);
    llvm::Value* hi = b_.CreateAdd(lo, index64(n.extent), n.var.name() + ".end");
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
    llvm::Value* as_type = n.var.dtype() == DType::i64() ? static_cast<llvm::Value*>(iv)
                                                         : b_.CreateTrunc(iv, reg_type(n.var.dtype()));
    vars_[n.var.id()] = as_type;
    stmt(n.body[0]);
    vars_.erase(n.var.id());
    llvm::Value* next = b_.CreateAdd(iv, b_.getInt64(1), "", /*HasNUW=*/false, /*HasNSW=*/true);
    iv->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(header);
    b_.SetInsertPoint(exit);
  }

  void allocate(const StmtNode& n) {
    const Buffer& buf = n.buffer;
    llvm::Value* count = b_.getInt64(1);
    int64_t const_count = 1;
    bool constant = true;
    for (const Expr& e : buf->shape) {
      int64_t v;
      if (is_const_int(e, &v)) const_count *= v;
      else constant = false;
      count = b_.CreateMul(count, index64(e));
    }
    int64_t bytes = const_count * buf->dtype.bytes();
    llvm::Type* elem = mem_type(buf->dtype);
    if (buf->scope != MemScope::Global && constant && bytes <= 64 * 1024) {
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
    llvm::FunctionCallee release = mod_.getOrInsertFunction("free", llvm::FunctionType::get(b_.getVoidTy(), {ptr}, false));
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
      case StmtKind::For: loop(n); return;
      case StmtKind::Allocate: allocate(n); return;
      case StmtKind::Store: {
        llvm::Value* v = expr(n.value);
        if (n.buffer->dtype.is_bool()) v = b_.CreateZExt(v, b_.getInt8Ty());
        b_.CreateStore(v, address(n.buffer, n.indices));
        return;
      }
      case StmtKind::IfThenElse: {
        llvm::Value* c = expr(n.cond);
        llvm::BasicBlock* tb = llvm::BasicBlock::Create(ctx_, "if.then", fn_);
        llvm::BasicBlock* eb = llvm::BasicBlock::Create(ctx_, "if.else", fn_);
        llvm::BasicBlock* mb = llvm::BasicBlock::Create(ctx_, "if.end", fn_);
        b_.CreateCondBr(c, tb, eb);
        b_.SetInsertPoint(tb);
        stmt(n.body[0]);
        b_.CreateBr(mb);
        b_.SetInsertPoint(eb);
        if (n.body.size() > 1) stmt(n.body[1]);
        b_.CreateBr(mb);
        b_.SetInsertPoint(mb);
        return;
      }
      case StmtKind::Seq:
        for (const Stmt& c : n.body) stmt(c);
        return;
      case StmtKind::Pragma: stmt(n.body[0]); return;
      case StmtKind::Barrier: throw Error("the CPU backend cannot compile a GPU barrier");
    }
  }

  llvm::LLVMContext& ctx_;
  llvm::Module& mod_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_block_ = nullptr;
  std::unordered_map<int64_t, llvm::Value*> vars_;
  std::unordered_map<const BufferNode*, llvm::Value*> bufs_;
};

}  // namespace

std::unique_ptr<llvm::Module> emit_llvm_module(const LoweredFunc& f, llvm::LLVMContext& ctx,
                                               const LlvmOptions& opt, const std::string& entry_name) {
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
