// See resolved_group.h.
#include "runtime/resolved_group.h"

namespace c10d_func {

std::string ResolvedGroup::describe() const {
  return spec.describe() + ", chunk " + chunk.describe();
}

}  // namespace c10d_func
