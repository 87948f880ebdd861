// A user's estimator (basin::Estimator) as the search's (models::Estimator): a
// differentiable one when the user's says it has a gradient.
#pragma once

#include <memory>

#include "basin/basin.h"
#include "models/estimator.h"

namespace basin::api {

// Throws basin::Error for a null estimator.
std::unique_ptr<models::Estimator> adapt(std::shared_ptr<Estimator> e);

}  // namespace basin::api
