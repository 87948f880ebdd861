// Internal to the LLVM backend: emission of loop IR as an LLVM module. Includes LLVM
// headers; only llvm_emit.cc and llvm_jit.cc include it.
#pragma once

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>

#include "codegen/llvm_jit.h"

namespace basin::codegen {

// The module defines `void <name>(ptr args)`, where args[i] is the pointer of
// f.params[i]; the body lives in an internal, always-inlined function whose buffer
// arguments are noalias.
std::unique_ptr<llvm::Module> emit_llvm_module(const LoweredFunc& f, llvm::LLVMContext& ctx, const LlvmOptions& opt,
                                               const std::string& entry_name);

}  // namespace basin::codegen
