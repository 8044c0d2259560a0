#pragma once
/// GEMM cost by shape: a tile/wave model of the library's GEMM kernel over the GPU's SMs
/// (gemm_cost.cpp says where each constant comes from), and a measured per-GPU table that
/// outranks it for the shapes it covers. Internal to sim/model: schedules call CostModel::gemm.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "model/cost_model.hpp"
#include "scenario/profile_csv.hpp"
#include "scenario/specs.hpp"

namespace cpsim::model {

/// The GEMM a pass runs, in cuBLAS's column-major terms as TransformerEngine calls it
/// (pytorch/module/linear.py general_gemm): fprop "TN", dgrad "NN", wgrad "NT".
struct GemmShape {
  double m = 0, n = 0, k = 0;
  int batch = 1;
  const char* layout = "TN";
};
GemmShape gemm_shape(const GemmCall& c);

/// Number format of a GEMM's inputs and what the recipe adds to its kernel.
enum class GemmFormat : uint8_t { Bf16, Fp8, Fp8Blockwise, Mxfp8, Nvfp4 };
GemmFormat gemm_format(const GemmCall& c);
const char* gemm_format_name(GemmFormat f);

/// The tile/wave model: the best of the library's CTA tiles (and split-K factors) for the shape,
/// each wave-quantised over the SMs, with its K-loop prologue, epilogue and the memory roofline;
/// on Hopper the main loop runs at the SM clock the 700 W limit leaves at the kernel's
/// tensor-core activity. Source Published: its constants are the GPU's best measured GEMM rate,
/// published kernel facts and the power headroom fitted to the measured H200 grid
/// (gemm_cost.cpp).
Cost gemm_tile_cost(const GemmShape& s, GemmFormat f, const scenario::GpuSpec& gpu);

/// A measured GEMM table for one GPU (kernels/profiles/<gpu>-gemm-measured.csv). A shape it
/// holds is priced from its row (Measured); a shape inside its grid (each of m, n, k within a
/// factor of two of a row of the same format) from the nearest row, scaled by the tile model's
/// ratio between the two shapes (Derived); anything else is left to the tile model.
class GemmTable {
 public:
  GemmTable(const scenario::GemmProfileTable& t, const scenario::GpuSpec& gpu);
  std::optional<Cost> price(const GemmShape& s, GemmFormat f) const;
  const std::string& path() const { return path_; }
  const std::string& origin() const { return origin_; }
  size_t rows() const { return rows_.size(); }

 private:
  struct Row {
    double m, n, k, time_s;
    std::string layout;
    CostSource source;
  };
  std::map<GemmFormat, std::vector<Row>> rows_;
  scenario::GpuSpec gpu_;
  std::string path_, origin_;
};

/// One line on the model's constants for `describe()`.
std::string describe_gemm_model(const scenario::GpuSpec& gpu);

}  // namespace cpsim::model
