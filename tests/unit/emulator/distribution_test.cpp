#include "ocslab/emulator/distribution.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

using namespace ocslab;
using namespace ocslab::emu;

namespace {
std::vector<double> draws(const Distribution& d, int n, uint64_t seed = 42) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = d.sample_ms(rng);
  return v;
}
double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

Distribution parse(const std::string& text) {
  YamlDoc doc = load_yaml_string(text, "lab.yaml");
  return Distribution::from_yaml(doc, doc.root["delay"]);
}
}  // namespace

TEST_CASE("fixed delays always give their value") {
  auto v = draws(Distribution::fixed(25), 100);
  CHECK(std::all_of(v.begin(), v.end(), [](double x) { return x == 25; }));
  std::mt19937_64 rng(1);
  CHECK(Distribution::fixed(25).sample(rng) == std::chrono::milliseconds(25));
  CHECK(Distribution::fixed(0.5).sample(rng) == std::chrono::microseconds(500));
  CHECK(Distribution::fixed(25).to_string() == "fixed 25 ms");
  CHECK(Distribution::fixed(25).mean_ms() == 25);
}

TEST_CASE("uniform delays stay within their bounds and spread across them") {
  auto d = Distribution::uniform(10, 20);
  auto v = draws(d, 20000);
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  CHECK(*lo >= 10);
  CHECK(*hi <= 20);
  CHECK(*lo < 10.1);  // 20000 draws reach both ends
  CHECK(*hi > 19.9);
  CHECK(mean(v) == Approx(15).margin(0.1));
  CHECK(d.mean_ms() == 15);
  CHECK(d.to_string() == "uniform 10..20 ms");
}

TEST_CASE("normal delays are clamped at their floor") {
  auto d = Distribution::normal(3000, 150, 2900);
  auto v = draws(d, 20000);
  CHECK(*std::min_element(v.begin(), v.end()) == 2900);  // about 25 % fall below and are clamped
  auto clamped = std::count(v.begin(), v.end(), 2900.0);
  CHECK(clamped > 20000 / 5);
  CHECK(clamped < 20000 / 3);
  auto unclamped = Distribution::normal(3000, 150, 0);
  auto u = draws(unclamped, 20000);
  CHECK(mean(u) == Approx(3000).margin(5));
  CHECK(*std::max_element(u.begin(), u.end()) > 3400);  // the spread is really there
  CHECK(d.to_string() == "normal 3000 sd 150 floor 2900 ms");
  // sd 0 is a fixed value, not a division by zero
  auto z = draws(Distribution::normal(7, 0, 0), 10);
  CHECK(std::all_of(z.begin(), z.end(), [](double x) { return x == 7; }));
}

TEST_CASE("the same seed reproduces the same delays") {
  auto d = Distribution::normal(6000, 300, 5000);
  CHECK(draws(d, 50, 7) == draws(d, 50, 7));
  CHECK(draws(d, 50, 7) != draws(d, 50, 8));
}

TEST_CASE("distributions parse from the YAML forms") {
  auto a = parse("delay: 25\n");
  CHECK(a.kind == Distribution::Kind::kFixed);
  CHECK(a.a_ms == 25);
  auto b = parse("delay: {fixed: 3.5}\n");
  CHECK(b.kind == Distribution::Kind::kFixed);
  CHECK(b.a_ms == 3.5);
  auto c = parse("delay:\n  uniform: [10, 20]\n");
  CHECK(c.kind == Distribution::Kind::kUniform);
  CHECK(c.a_ms == 10);
  CHECK(c.b_ms == 20);
  auto d = parse("delay:\n  normal: {mean: 6000, sd: 300, floor: 5000}\n");
  CHECK(d.kind == Distribution::Kind::kNormal);
  CHECK(d.a_ms == 6000);
  CHECK(d.b_ms == 300);
  CHECK(d.floor_ms == 5000);
  auto e = parse("delay: {normal: {mean: 100}}\n");
  CHECK(e.b_ms == 0);
  CHECK(e.floor_ms == 0);
}

TEST_CASE("bad distributions are reported with file, line and column") {
  CHECK_THROWS_AS(parse("delay: -3\n"), ConfigError);
  CHECK_THROWS_WITH(parse("delay: -3\n"), Catch::StartsWith("lab.yaml:1:8: a delay cannot be negative"));
  CHECK_THROWS_WITH(parse("delay: soon\n"),
                    Catch::StartsWith("lab.yaml:1:8: expected a number of milliseconds, got 'soon'"));
  CHECK_THROWS_WITH(parse("x: 1\ndelay:\n  uniform: [20, 10]\n"),
                    Catch::StartsWith("lab.yaml:3:12: uniform: HI is below LO"));
  CHECK_THROWS_WITH(parse("delay:\n  uniform: [1, 2, 3]\n"),
                    Catch::StartsWith("lab.yaml:2:12: uniform needs [LO, HI]"));
  CHECK_THROWS_WITH(parse("delay:\n  uniform: [1, -2]\n"),
                    Catch::StartsWith("lab.yaml:2:16: a delay cannot be negative"));
  CHECK_THROWS_WITH(parse("delay:\n  gamma: 3\n"),
                    Catch::StartsWith("lab.yaml:2:3: unknown distribution 'gamma' (fixed, uniform, normal)"));
  CHECK_THROWS_WITH(parse("delay:\n  normal: {mean: 5, sdev: 1}\n"),
                    Catch::StartsWith("lab.yaml:2:21: unknown key 'sdev'"));
  CHECK_THROWS_WITH(parse("delay:\n  normal: {sd: 1}\n"), Catch::Contains("lab.yaml:2:11: missing key 'mean'"));
  CHECK_THROWS_WITH(parse("delay:\n  normal: 5\n"),
                    Catch::StartsWith("lab.yaml:2:11: normal needs {mean: MS, sd: MS, floor: MS}"));
  CHECK_THROWS_WITH(parse("delay: [1, 2]\n"), Catch::StartsWith("lab.yaml:1:8: expected milliseconds or one of"));
  CHECK_THROWS_WITH(parse("delay: {fixed: 1, uniform: [1, 2]}\n"),
                    Catch::StartsWith("lab.yaml:1:8: expected milliseconds"));
}

TEST_CASE("delays that no timer can hold are refused, not drawn", "[emulator]") {
  // NaN passed the negative check, and .inf or 1e300 overflowed the int64 nanoseconds of a
  // draw (undefined behaviour); caught by emulator_lab_config_fuzz's properties.
  CHECK_THROWS_WITH(parse("delay: .nan\n"), Catch::StartsWith("lab.yaml:1:8: a delay must be a finite number"));
  CHECK_THROWS_WITH(parse("delay: .inf\n"), Catch::StartsWith("lab.yaml:1:8: a delay must be a finite number"));
  CHECK_THROWS_WITH(parse("delay:\n  uniform: [1, .inf]\n"),
                    Catch::StartsWith("lab.yaml:2:16: a delay must be a finite"));
  CHECK_THROWS_WITH(parse("delay: 1e300\n"), Catch::StartsWith("lab.yaml:1:8: a delay of 1e+300 ms is over the limit"));
  CHECK_THROWS_WITH(parse("delay:\n  normal: {mean: 5, sd: 1e12}\n"),
                    Catch::Contains("over the limit of 1000000000 ms"));
  // The limit itself is a valid delay, and its draws stay in range.
  std::mt19937_64 rng(1);
  CHECK(parse("delay: 1e9\n").sample(rng) == std::chrono::milliseconds(1000000000));
  auto n = parse("delay: {normal: {mean: 1e9, sd: 1e9}}\n");
  for (int i = 0; i < 100; ++i) CHECK(n.sample(rng).count() >= 0);
}
