// A minimal Apache Parquet writer: one row group, one uncompressed data page (v1) per
// column, PLAIN encoding, flat schemas of INT64, FLOAT, DOUBLE and UTF-8 strings, each
// column required or optional (nulls as definition levels). Enough for the datasets
// basin exports (`basin records export --format parquet`) to be read by pandas, pyarrow,
// polars or DuckDB without a conversion step.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace basin {

struct ParquetColumn {
  enum class Type { Int64, Float, Double, String };
  std::string name;
  Type type = Type::Double;
  // Values of the column's type, one per row (a null row's value is ignored).
  std::vector<int64_t> i64;
  std::vector<float> f32;
  std::vector<double> f64;
  std::vector<std::string> str;
  // Empty: a required column (every row has a value). Else one flag per row, false
  // for a null: an optional column.
  std::vector<bool> present;

  size_t rows() const;
};

// The bytes of a Parquet file holding `columns` (equal row counts) and the key-value
// metadata given. Throws basin::Error when the columns' lengths differ or a name is
// empty or repeated.
std::string parquet_file(const std::vector<ParquetColumn>& columns,
                         const std::vector<std::pair<std::string, std::string>>& metadata = {});

}  // namespace basin
