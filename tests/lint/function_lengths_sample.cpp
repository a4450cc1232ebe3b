// Input of the function_lengths_self test (not compiled): scripts/function-lengths 6 must report
// exactly long_one (line 5, 9 lines: its lambda and the braces in its strings count in it).
#include <string>

int long_one(int x) {
  auto f = [](int y) { return y + 1; };
  std::string s = "{ not a block";
  const char* r = R"(} nor this {)";
  if (x > 0) {
    x = f(x);
  }
  return x + static_cast<int>(s.size() + std::string(r).size());
}

int short_one(int x) {
  return x;
}

struct Holder {
  int member(int x) const {
    return x * 2;
  }
};
