#pragma once
/// `cpsim plan`'s text: the ranked table in fixed-width columns (each as wide as its widest
/// cell, capped, so that no label shifts the others) and "why the others lost" with the near
/// misses first. Pure functions of a plan::Result, so the bytes depend on the search alone.
#include <string>
#include <vector>

#include "app/plan_search.hpp"

namespace cpsim::app::plan {

/// Columns as wide as their widest cell (header included), at most `max_width` characters: a
/// longer cell keeps its first max_width - 1 characters and ends in '~'. `right[c]` aligns
/// column c right (numbers). Two spaces between columns, lines without trailing blanks.
std::string text_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                       const std::vector<bool>& right, size_t max_width);

/// The ranked table: rank, the layout split into its axes (tp cp pp dp v m scheme rc z, and
/// one column per axis the search varied beyond those), memory, the step times, tokens/s and
/// MFU; at most `top` rows. Memory within model::kTightHeadroom of `capacity_bytes` (possible
/// only with a --memory-budget above the default) is marked "tight".
std::string ranked_table(const Result& res, int top, double peak_flops, int gpus, double capacity_bytes);

/// Indices into res.all of the layouts that lost, closest to winning first, a few of each kind:
/// the runners-up by throughput; those not simulated (--budget, the lower bound, too big) by
/// the best throughput their bound allows; the screened schemes by how far their attention
/// layer is from their (TP, CP)'s best; the out-of-memory ones by how far they overflow the
/// budget; then a few dominated, invalid and failed ones. Deterministic: ties by label.
std::vector<size_t> near_misses(const Result& res);

/// "why the others lost": one line per near miss, status and label in fixed columns, then why.
std::string why_lost(const Result& res);

}  // namespace cpsim::app::plan
