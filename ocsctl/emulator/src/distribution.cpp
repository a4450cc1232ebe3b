#include "ocslab/emulator/distribution.h"

#include <fmt/format.h>

#include <algorithm>

namespace ocslab::emu {

double Distribution::sample_ms(std::mt19937_64& rng) const {
  switch (kind) {
    case Kind::kFixed:
      return a_ms;
    case Kind::kUniform:
      return std::uniform_real_distribution<double>(a_ms, b_ms)(rng);
    case Kind::kNormal:
      return std::max(floor_ms, b_ms > 0 ? std::normal_distribution<double>(a_ms, b_ms)(rng) : a_ms);
  }
  return a_ms;
}

std::chrono::nanoseconds Distribution::sample(std::mt19937_64& rng) const {
  return std::chrono::nanoseconds(static_cast<int64_t>(std::max(0.0, sample_ms(rng)) * 1e6));
}

double Distribution::mean_ms() const {
  switch (kind) {
    case Kind::kFixed: return a_ms;
    case Kind::kUniform: return (a_ms + b_ms) / 2;
    case Kind::kNormal: return a_ms;  // ignoring the floor's small bias
  }
  return a_ms;
}

std::string Distribution::to_string() const {
  switch (kind) {
    case Kind::kFixed: return fmt::format("fixed {} ms", a_ms);
    case Kind::kUniform: return fmt::format("uniform {}..{} ms", a_ms, b_ms);
    case Kind::kNormal: return fmt::format("normal {} sd {} floor {} ms", a_ms, b_ms, floor_ms);
  }
  return "?";
}

namespace {
double non_negative(const YamlDoc& doc, const YAML::Node& n) {
  double v = 0;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    throw config_error(doc, n, "expected a number of milliseconds, got '" + (n.IsScalar() ? n.Scalar() : std::string("a structure")) + "'");
  }
  if (v < 0) throw config_error(doc, n, "a delay cannot be negative");
  return v;
}
}  // namespace

Distribution Distribution::from_yaml(const YamlDoc& doc, const YAML::Node& node) {
  if (node.IsScalar()) return fixed(non_negative(doc, node));
  if (!node.IsMap() || node.size() != 1) {
    throw config_error(doc, node, "expected milliseconds or one of {fixed: MS}, {uniform: [LO, HI]}, {normal: {mean, sd, floor}}");
  }
  auto kv = *node.begin();
  std::string kind = kv.first.Scalar();
  const YAML::Node& v = kv.second;
  if (kind == "fixed") return fixed(non_negative(doc, v));
  if (kind == "uniform") {
    if (!v.IsSequence() || v.size() != 2) throw config_error(doc, v, "uniform needs [LO, HI]");
    double lo = non_negative(doc, v[0]), hi = non_negative(doc, v[1]);
    if (hi < lo) throw config_error(doc, v, "uniform: HI is below LO");
    return uniform(lo, hi);
  }
  if (kind == "normal") {
    if (!v.IsMap()) throw config_error(doc, v, "normal needs {mean: MS, sd: MS, floor: MS}");
    for (const auto& f : v) {
      std::string k = f.first.Scalar();
      if (k != "mean" && k != "sd" && k != "floor") throw config_error(doc, f.first, "unknown key '" + k + "' (mean, sd, floor)");
    }
    double mean = non_negative(doc, require(doc, v, "mean"));
    double sd = v["sd"] ? non_negative(doc, v["sd"]) : 0;
    double fl = v["floor"] ? non_negative(doc, v["floor"]) : 0;
    return normal(mean, sd, fl);
  }
  throw config_error(doc, kv.first, "unknown distribution '" + kind + "' (fixed, uniform, normal)");
}

}  // namespace ocslab::emu
