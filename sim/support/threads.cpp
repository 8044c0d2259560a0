#include "support/threads.hpp"

#include <algorithm>
#include <thread>

namespace cpsim::support {

unsigned threads_for(unsigned asked, size_t work) {
  if (asked > 0) return asked;
  if (work < (size_t{1} << 18)) return 1;
  return std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
}

}  // namespace cpsim::support
