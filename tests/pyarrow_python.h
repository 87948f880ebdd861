// A Python interpreter with pyarrow, for the tests that read basin's Parquet files
// with the reference implementation: BASIN_PYARROW_PYTHON, else the peers' virtual
// environment (bench/peers/setup.sh installs pyarrow there), else the Pythons on PATH
// and Debian's. Empty where none has it: those tests skip, saying so.
#pragma once

#include <cstdlib>
#include <string>

namespace basin::testing {

inline std::string pyarrow_python() {
  std::string candidates[] = {std::getenv("BASIN_PYARROW_PYTHON") ? std::getenv("BASIN_PYARROW_PYTHON") : "",
                              std::string(BASIN_SOURCE_DIR) + "/.cache/peers/bin/python", "python3",
                              "/usr/bin/python3"};
  for (const std::string& py : candidates)
    if (!py.empty() && std::system(("'" + py + "' -c 'import pyarrow.parquet' >/dev/null 2>&1").c_str()) == 0)
      return py;
  return "";
}

}  // namespace basin::testing
