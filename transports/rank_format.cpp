// See rank_format.h.
#include "transports/rank_format.h"

#include <sstream>

namespace c10d_func {

std::string format_ranks(c10::ArrayRef<int64_t> ranks) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < ranks.size(); ++i) {
    out << (i ? ", " : "") << ranks[i];
  }
  out << ']';
  return out.str();
}

}  // namespace c10d_func
