#include "ocslab/emulator/distribution.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

std::string Distribution::to_yaml() const {
  switch (kind) {
    case Kind::kFixed: return fmt::format("{}", a_ms);
    case Kind::kUniform: return fmt::format("{{uniform: [{}, {}]}}", a_ms, b_ms);
    case Kind::kNormal: return fmt::format("{{normal: {{mean: {}, sd: {}, floor: {}}}}}", a_ms, b_ms, floor_ms);
  }
  return "?";
}

double delay_ms_from_yaml(const YamlDoc& doc, const YAML::Node& n) {
  double v = 0;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    throw config_error(
        doc, n,
        "expected a number of milliseconds, got '" + (n.IsScalar() ? n.Scalar() : std::string("a structure")) + "'");
  }
  // NaN passes every comparison and .inf or 1e300 overflows the int64 nanoseconds a timer
  // is set with (undefined behaviour), so both are refused here rather than at the draw.
  if (std::isnan(v) || std::isinf(v)) throw config_error(doc, n, "a delay must be a finite number of milliseconds");
  if (v < 0) throw config_error(doc, n, "a delay cannot be negative");
  if (v > kMaxDelayMs)
    throw config_error(doc, n, fmt::format("a delay of {} ms is over the limit of {} ms", v, kMaxDelayMs));
  return v;
}

Distribution Distribution::from_yaml(const YamlDoc& doc, const YAML::Node& node) {
  if (node.IsScalar()) return fixed(delay_ms_from_yaml(doc, node));
  if (!node.IsMap() || node.size() != 1) {
    throw config_error(doc, node, "expected milliseconds or one of {fixed: MS}, {uniform: [LO, HI]}, {normal: {mean, sd, floor}}");
  }
  auto kv = *node.begin();
  std::string kind = kv.first.Scalar();
  const YAML::Node& v = kv.second;
  if (kind == "fixed") return fixed(delay_ms_from_yaml(doc, v));
  if (kind == "uniform") {
    if (!v.IsSequence() || v.size() != 2) throw config_error(doc, v, "uniform needs [LO, HI]");
    double lo = delay_ms_from_yaml(doc, v[0]), hi = delay_ms_from_yaml(doc, v[1]);
    if (hi < lo) throw config_error(doc, v, "uniform: HI is below LO");
    return uniform(lo, hi);
  }
  if (kind == "normal") {
    if (!v.IsMap()) throw config_error(doc, v, "normal needs {mean: MS, sd: MS, floor: MS}");
    for (const auto& f : v) {
      std::string k = f.first.Scalar();
      if (k != "mean" && k != "sd" && k != "floor") throw config_error(doc, f.first, "unknown key '" + k + "' (mean, sd, floor)");
    }
    double mean = delay_ms_from_yaml(doc, require(doc, v, "mean"));
    double sd = v["sd"] ? delay_ms_from_yaml(doc, v["sd"]) : 0;
    double fl = v["floor"] ? delay_ms_from_yaml(doc, v["floor"]) : 0;
    return normal(mean, sd, fl);
  }
  throw config_error(doc, kv.first, "unknown distribution '" + kind + "' (fixed, uniform, normal)");
}

}  // namespace ocslab::emu
