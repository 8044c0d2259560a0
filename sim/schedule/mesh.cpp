#include "schedule/mesh.hpp"

#include <stdexcept>
#include <string>

namespace cpsim::schedule {

Mesh::Mesh(const scenario::ParallelSpec& p) {
  size_ = {p.tp, p.cp, p.pp, p.dp};
  auto dim = [](const std::string& s) {
    if (s == "tp") return 0;
    if (s == "cp") return 1;
    if (s == "pp") return 2;
    if (s == "dp") return 3;
    throw std::invalid_argument("unknown mesh dimension '" + s + "'");
  };
  if (p.order.size() != 4) throw std::invalid_argument("mesh order must name tp, cp, pp, dp");
  for (int k = 0; k < 4; ++k) order_[k] = dim(p.order[k]);
}

int Mesh::rank_of(const std::array<int, 4>& c) const {
  int r = 0;
  for (int k = 3; k >= 0; --k) r = r * size_[order_[k]] + c[order_[k]];
  return r;
}

std::array<int, 4> Mesh::coord_of(int rank) const {
  std::array<int, 4> c{};
  for (int k = 0; k < 4; ++k) {
    c[order_[k]] = rank % size_[order_[k]];
    rank /= size_[order_[k]];
  }
  return c;
}

std::vector<int> Mesh::group(int rank, Dim d) const {
  auto c = coord_of(rank);
  std::vector<int> out;
  for (int i = 0; i < size_[d]; ++i) {
    c[d] = i;
    out.push_back(rank_of(c));
  }
  return out;
}

}  // namespace cpsim::schedule
