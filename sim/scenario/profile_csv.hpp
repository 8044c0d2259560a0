#pragma once
/// Kernel profile CSVs (kernels/profiles/*.csv) read into a plain table. The scenario stage is
/// the only one that parses input files: the cost model (sim/model/profile_model.cpp) only
/// interpolates between these rows. Errors name file:line:col with the offending line and a
/// caret, through the same formatter as the YAML loader.
#include <cstdint>
#include <string>
#include <vector>

#include "scenario/mask.hpp"
#include "scenario/specs.hpp"

namespace cpsim::scenario {

/// Where a row's time comes from. Derived rows (computed from other rows, not timed) are kept
/// apart from published and measured ones and reported as such.
enum class RowSource : uint8_t { Measured, Published, Derived };
inline constexpr const char* kRowSourceNames[] = {"measured", "published", "derived"};

struct ProfileRow {
  std::string gpu;              ///< "H100-SXM"
  std::string kernel;           ///< implementation: fa2, fa3, cudnn, ...
  bool backward = false;
  /// A forward+backward figure (3.5 x the forward FLOPs): kept for validation and for
  /// `cpsim kernels price --direction fwdbwd`, never used to price a single kernel.
  bool fwdbwd = false;
  int64_t q_len = 0, kv_len = 0;
  Mask mask = Mask::Full;
  double unmasked_fraction = 1;
  int heads_q = 0, heads_kv = 0, head_dim = 0;
  /// Number format, lower case: bf16 (or fp16) rows price attention; fp8 rows (fp8 or
  /// fp8-<recipe>) are FP8 attention's own profile, read for its FP8/BF16 ratio.
  std::string dtype = "bf16";
  double time_s = 0;
  RowSource source = RowSource::Published;
  std::string reference;        ///< the `commit` column: commit measured at, or the citation
  int line = 0;                 ///< 1-based line in the file
};

struct ProfileTable {
  std::string path;
  std::vector<ProfileRow> rows;
};

/// One Gated DeltaNet chunk_gated_delta_rule call timed (kernels/profiles/<gpu>-gdn-<impl>-*.csv,
/// written by kernels/profiles/make_gdn_published.py): `seqs` sequences of `seq_len` tokens.
struct GdnProfileRow {
  std::string gpu;              ///< "H200-SXM"
  std::string kernel;           ///< "fla-gdn"
  bool backward = false;
  int64_t seq_len = 0;
  int seqs = 1, heads_k = 0, heads_v = 0, key_dim = 0, value_dim = 0, chunk = 64;
  double time_s = 0;
  RowSource source = RowSource::Published;
  std::string reference;        ///< where the figure comes from
  int line = 0;
};

/// One GEMM timed (kernels/profiles/<gpu>-gemm-measured.csv): D[m x n] = A[m x k] B[k x n].
struct GemmProfileRow {
  std::string gpu;              ///< "H200-SXM"
  std::string dtype;            ///< lower case as written: bf16, fp8, fp8-tensorwise, fp8-rowwise, ...
  std::string layout;           ///< TN / NT / NN as cuBLAS names the operands ("" = not given)
  double m = 0, n = 0, k = 0;
  double time_s = 0;
  RowSource source = RowSource::Measured;
  std::string reference;        ///< the `source` text when it is not a source class, or `reference`
  int line = 0;
};

struct GemmProfileTable {
  std::string path;
  std::vector<GemmProfileRow> rows;
};

/// Reads a GEMM profile CSV: columns gpu, dtype, m, n, k, time_us required; layout, source,
/// reference optional (a `source` cell that is not measured/published/derived is kept as the
/// reference, the row measured when the file is a -measured.csv, else published).
GemmProfileTable read_gemm_profile_csv(const std::string& path);

/// The bundled GEMM table for `gpu`: <key>-gemm-measured.csv, else <key>-gemm-published.csv,
/// whose key the GPU's name contains. Empty if none.
std::string find_bundled_gemm_profile(const GpuSpec& gpu);

struct GdnProfileTable {
  std::string path;
  std::vector<GdnProfileRow> rows;
};

/// Reads and validates a Gated DeltaNet profile CSV (same errors as read_profile_csv).
GdnProfileTable read_gdn_profile_csv(const std::string& path);

/// The bundled Gated DeltaNet profile for `gpu`: <key>-gdn-<impl>-measured.csv, else
/// -published.csv, whose key the GPU's name contains; on a Hopper GPU another Hopper part's
/// (h100/h200/h800: one SM90 die) if it has none. Empty if none.
std::string find_bundled_gdn_profile(const GpuSpec& gpu);

/// Reads and validates a profile CSV. Throws InputError (file:line:col, yaml path
/// "cost.profile") on any bad cell, a missing column or an empty table.
ProfileTable read_profile_csv(const std::string& path);

/// The bundled profile for `gpu` and attention implementation `impl` ("" = any) in
/// data_dir()/kernels/profiles: <key>[-<impl>]-measured.csv whose key the GPU's name contains
/// (longest key wins), else <key>[-<impl>]-published.csv; a published H100 profile also serves
/// H800 and H200 (the same SM90 die). Empty if none.
std::string find_bundled_profile(const GpuSpec& gpu, const std::string& impl);

}  // namespace cpsim::scenario
