// NumPy .npy files (format versions 1 to 3, C order, little-endian float32, float64,
// int64, int32 and bool): the inputs and outputs of `basin run`.
#pragma once

#include <string>
#include <vector>

#include "core/ir/ndarray.h"

namespace basin {

// Throws NotFoundError when the file cannot be opened and ParseError naming the file
// when it is not a supported .npy array.
NDArray read_npy(const std::string& path);
// Written by core/util/output_file.h's rules; `inputs` are paths it must not replace.
void write_npy(const std::string& path, const NDArray& a, const std::vector<std::string>& inputs = {});

}  // namespace basin
