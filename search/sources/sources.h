// The gradient search's first batch, before anything is measured (first_batch.cc): the
// strategy's own part, beside the descent; the proposal sources of later batches are
// registered (source.h).
#pragma once

#include <vector>

#include "search/strategy.h"

namespace basin::search::detail {

// The sketches in turn (in a random order), each its best predicted of `draws` random
// programs, and with `fill` first its best with a register-filling tile, then with
// `whole` its best with the fullest filling tile that has no partial tile (factors that
// divide their extents): on AVX2, resnet18-c10's and -c12's fastest programs' 1 x 7
// tiles were never the fullest, and guarded tiles of 12 ran 10 to 20% slower.
struct FirstBatchOptions {
  int draws = 32;
  int fill = 1;
  int whole = 1;
};
// `fill_registers`: the vector registers a filling tile may take with the operand
// values it keeps live (0: the host's file; the fill source's option).
std::vector<Candidate> first_batch(SearchState& state, int n, const FirstBatchOptions& opt, int fill_registers);

}  // namespace basin::search::detail
