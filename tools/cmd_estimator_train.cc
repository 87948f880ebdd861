// `basin estimator train` and `basin estimator eval` (filled in with the estimators).
#include "tools/commands.h"

namespace basin::tools {
void add_estimator_train_eval(CLI::App*, Runner&) {}
}  // namespace basin::tools
