#include "ocslab/common/sample.h"

#include <fmt/format.h>

namespace ocslab {

const std::vector<std::string>& sample_csv_columns() {
  static const std::vector<std::string> cols = {"t_ns",   "host",  "source", "subject",
                                                "signal", "value", "unit"};
  return cols;
}

std::vector<std::string> sample_csv_fields(const Sample& s) {
  return {std::to_string(s.t_ns), s.host,  s.source, s.subject, s.signal, fmt::format("{}", s.value),
          s.unit};
}

}  // namespace ocslab
