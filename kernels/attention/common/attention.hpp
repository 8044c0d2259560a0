#pragma once
/// What every attention kernel variant, its tests and its benchmark share: the problem shape,
/// the mask, FLOP accounting, the benchmark shape list and the profile CSV row. Plain C++
/// (no CUDA), so the CPU reference, the CUDA launchers and the tools all speak the same types.
#include <cstdint>
#include <string>
#include <vector>

namespace cpsim::kernels {

/// Mask kinds. The codes are those of model::AttentionCall::mask and the names those of the
/// profile CSV `mask` column; the simulator and the kernels meet only through that data.
enum class MaskKind : uint8_t { Full = 0, Causal = 1, Document = 2, CausalOffset = 3 };
const char* mask_name(MaskKind m);  ///< "full", "causal", "document", "causal-offset"
/// Parses a mask name; false if unknown.
bool parse_mask(const std::string& name, MaskKind& out);

/// Sizes of one attention call. Layouts (the reference fixes them; the CUDA launchers take
/// strides): Q, O, dQ, dO [batch, q_len, heads_q, head_dim]; K, V, dK, dV
/// [batch, kv_len, heads_kv, head_dim]; LSE [batch, heads_q, q_len], the natural-log
/// log-sum-exp of the scaled scores of each query row (-inf for a row with no unmasked key).
/// GQA: query head h reads key/value head h / (heads_q / heads_kv).
struct AttnShape {
  int batch = 1;
  int q_len = 0;
  int kv_len = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int head_dim = 0;
};

/// Which (query i, key j) pairs take part. All of them, or with `causal` only those with
/// k_offset + j <= q_offset + i (the diagonal block of a causal sequence has equal offsets; a
/// ring or all-gather step passes the global positions of its two blocks); with document ids,
/// further only q_doc[i] == k_doc[j]. Document ids are per token, [batch, q_len] and
/// [batch, kv_len], nondecreasing along the sequence (cu_seqlens-style packing): kernels use
/// that to skip tiles. Pointers refer to memory of whichever device runs the kernel.
struct MaskSpec {
  bool causal = false;
  int64_t q_offset = 0;
  int64_t k_offset = 0;
  const int32_t* q_doc = nullptr;
  const int32_t* k_doc = nullptr;
};

/// Unmasked (i, j) pairs summed over the batch (host pointers). O(batch x (q_len + kv_len)).
int64_t count_pairs(const AttnShape& shape, const MaskSpec& mask);

/// FlashAttention's FLOP convention: forward 4 x pairs x heads_q x head_dim (two GEMMs of
/// 2 FLOP per multiply-add), backward 2.5 x forward. `pairs` as count_pairs returns it.
double attention_flops(const AttnShape& shape, int64_t pairs, bool backward);

/// One benchmark shape (a row of kernels/attention/shapes.csv). Batch is always 1: the profile
/// CSV has no batch column, and the simulator folds batch into FLOPs.
struct BenchShape {
  int q_len = 0;
  int kv_len = 0;
  MaskKind mask = MaskKind::Full;
  int heads_q = 0;
  int heads_kv = 0;
  int head_dim = 0;
  int64_t q_offset = 0;  ///< causal-offset / document: global position of query 0
  int64_t k_offset = 0;  ///< causal-offset / document: global position of key 0
  int doc_len = 0;       ///< document: tokens per document (documents tile the positions)
  std::string note;
};

/// Reads a shape list. Throws std::runtime_error("FILE:LINE: error: ...") on bad input.
std::vector<BenchShape> load_shape_list(const std::string& path);
/// Parses shape-list text; `file` only names the source in messages.
std::vector<BenchShape> parse_shape_list(const std::string& text, const std::string& file);

/// Host-side mask of a bench shape: the spec plus the document-id arrays it points into.
/// Not copyable (the spec points into the vectors).
struct HostMask {
  AttnShape shape;
  MaskSpec spec;
  std::vector<int32_t> q_doc, k_doc;

  HostMask() = default;
  HostMask(const HostMask&) = delete;
  HostMask& operator=(const HostMask&) = delete;
};
/// Shape and mask of `s` at the given batch; document ids are (offset + i) / doc_len.
void make_mask(const BenchShape& s, int batch, HostMask& out);

/// One row of a kernel profile (kernels/profiles/*.csv); the simulator's cost model reads these.
struct ProfileRow {
  std::string gpu;
  std::string kernel;
  std::string direction;  ///< "fwd" or "bwd"
  int q_len = 0;
  int kv_len = 0;
  std::string mask;  ///< mask_name()
  double unmasked_fraction = 1;
  int heads_q = 0;
  int heads_kv = 0;
  int head_dim = 0;
  std::string dtype = "bf16";
  double time_us = 0;
  double tflops = 0;
  std::string source;  ///< "measured" or "published"
  std::string commit;
};
/// The CSV header line (no newline), the column order of format_profile_row.
const char* profile_csv_header();
std::string format_profile_row(const ProfileRow& r);

}  // namespace cpsim::kernels
