// The forwarding journal is read back from disk by rollback and apply: any bytes must give a
// journal or an ocslab::Error (never a crash), and a journal that loads must survive a round
// trip through its JSON form unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "ocslab/common/error.h"
#include "ocslab/forwarding/apply.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  auto j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    auto journal = ocslab::forwarding::journal_from_json(j);
    auto once = ocslab::forwarding::to_json(journal);
    auto twice = ocslab::forwarding::to_json(ocslab::forwarding::journal_from_json(once));
    if (once != twice) std::abort();
  } catch (const ocslab::Error&) {
  }
  return 0;
}
