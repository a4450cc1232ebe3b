// The one Catch2 main, compiled once and linked into every test binary.
//
// It also registers FailureRecap: at the end of a run, every failed assertion is printed again
// in a few compact lines (test case, file:line, expression and its expansion, the INFO/CAPTURE
// messages). The virtual-lab tests print a lot while they work, and CI keeps only the tail of a
// failed test's output (see the Makefile), so the recap is what a CI log shows of a failure.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <iostream>
#include <string>
#include <vector>

namespace {

// One line, at most `max` characters: a recap must stay short enough to survive the tail cut.
std::string one_line(std::string s, std::size_t max = 400) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

class FailureRecap : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    TestEventListenerBase::testCaseStarting(info);
    case_name_ = info.name;
    case_may_fail_ = info.okToFail();
  }

  bool assertionEnded(Catch::AssertionStats const& stats) override {
    const Catch::AssertionResult& r = stats.assertionResult;
    if (r.isOk()) return true;  // passed, a message, or a CHECK_NOFAIL
    std::string line = "  " + case_name_ + (case_may_fail_ ? " (allowed to fail)" : "") + "\n    at " +
                       r.getSourceInfo().file + ":" + std::to_string(r.getSourceInfo().line) + ": ";
    if (r.hasExpression()) {
      line += one_line(r.getExpressionInMacro());
      if (r.hasExpandedExpression()) line += "  with  " + one_line(r.getExpandedExpression());
    }
    if (r.hasMessage()) line += "  " + one_line(r.getMessage());
    for (const Catch::MessageInfo& m : stats.infoMessages) {
      if (m.message != r.getMessage()) line += "\n    info: " + one_line(m.message, 300);
    }
    failures_.push_back(std::move(line));
    return true;
  }

  void testRunEnded(Catch::TestRunStats const& stats) override {
    TestEventListenerBase::testRunEnded(stats);
    if (failures_.empty()) return;
    constexpr std::size_t kShown = 12;
    std::cout << "\n== failure recap: " << failures_.size() << " failed assertion(s) ==\n";
    for (std::size_t i = 0; i < failures_.size() && i < kShown; ++i) std::cout << failures_[i] << "\n";
    if (failures_.size() > kShown) std::cout << "  ... and " << failures_.size() - kShown << " more\n";
    std::cout << std::flush;
  }

 private:
  std::string case_name_;
  bool case_may_fail_ = false;
  std::vector<std::string> failures_;
};

}  // namespace

CATCH_REGISTER_LISTENER(FailureRecap)
