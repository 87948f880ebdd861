// Pass: simplify every expression of a statement with the analyzer, knowing the range
// of each enclosing loop variable; drop loops of extent 0, replace loops of extent 1
// (other than GPU bindings) by their body, and drop branches whose condition is decided.
//
// Requires: nothing. Ensures: the program computes the same values.
#pragma once

#include "core/expr/analyzer.h"
#include "core/ir/stmt.h"

namespace basin {

Stmt simplify_stmt(const Stmt& s, Analyzer analyzer = Analyzer());

}  // namespace basin
