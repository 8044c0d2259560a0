// Shared attention problem helpers: mask names, pair counting, shape lists, profile rows.
#include "attention.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cpsim::kernels {

const char* mask_name(MaskKind m) {
  switch (m) {
    case MaskKind::Full:
      return "full";
    case MaskKind::Causal:
      return "causal";
    case MaskKind::Document:
      return "document";
    case MaskKind::CausalOffset:
      return "causal-offset";
  }
  return "?";
}

bool parse_mask(const std::string& name, MaskKind& out) {
  for (MaskKind m :
       {MaskKind::Full, MaskKind::Causal, MaskKind::Document, MaskKind::CausalOffset}) {
    if (name == mask_name(m)) {
      out = m;
      return true;
    }
  }
  return false;
}

namespace {

void check_nondecreasing(const int32_t* ids, int n, const char* what) {
  for (int i = 1; i < n; ++i) {
    if (ids[i] < ids[i - 1]) {
      throw std::invalid_argument(std::string(what) + " document ids decrease at token " +
                                  std::to_string(i) + " (packed documents must be contiguous)");
    }
  }
}

}  // namespace

int64_t count_pairs(const AttnShape& shape, const MaskSpec& mask) {
  int64_t total = 0;
  const int64_t nq = shape.q_len, nk = shape.kv_len;
  for (int b = 0; b < shape.batch; ++b) {
    const int32_t* qd = mask.q_doc ? mask.q_doc + b * nq : nullptr;
    const int32_t* kd = mask.k_doc ? mask.k_doc + b * nk : nullptr;
    if ((qd == nullptr) != (kd == nullptr)) {
      throw std::invalid_argument("document mask needs both query and key document ids");
    }
    if (qd) {
      check_nondecreasing(qd, shape.q_len, "query");
      check_nondecreasing(kd, shape.kv_len, "key");
    }
    int64_t lo = 0, hi = 0;  // keys of the current query's document: [lo, hi)
    for (int64_t i = 0; i < nq; ++i) {
      int64_t first = 0, last = nk;  // allowed keys [first, last)
      if (qd) {
        while (lo < nk && kd[lo] < qd[i]) ++lo;
        if (hi < lo) hi = lo;
        while (hi < nk && kd[hi] <= qd[i]) ++hi;
        first = lo;
        last = hi;
      }
      if (mask.causal)
        last = std::min(last, std::max<int64_t>(0, mask.q_offset + i - mask.k_offset + 1));
      total += std::max<int64_t>(0, last - first);
    }
  }
  return total;
}

double attention_flops(const AttnShape& shape, int64_t pairs, bool backward) {
  const double fwd = 4.0 * static_cast<double>(pairs) * shape.heads_q * shape.head_dim;
  return backward ? 2.5 * fwd : fwd;
}

namespace {

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) {
    const auto b = cell.find_first_not_of(" \t\r");
    const auto e = cell.find_last_not_of(" \t\r");
    out.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

}  // namespace

std::vector<BenchShape> parse_shape_list(const std::string& text, const std::string& file) {
  static const std::vector<std::string> kColumns = {"q_len",    "kv_len",   "mask",     "heads_q",
                                                    "heads_kv", "head_dim", "q_offset", "k_offset",
                                                    "doc_len",  "note"};
  std::vector<BenchShape> shapes;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  bool header_seen = false;
  auto fail = [&](const std::string& msg) {
    throw std::runtime_error(file + ":" + std::to_string(line_no) + ": error: " + msg);
  };
  while (std::getline(in, line)) {
    ++line_no;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto cells = split_csv(line);
    if (!header_seen) {
      if (cells != kColumns) {
        std::string want;
        for (const auto& c : kColumns) want += (want.empty() ? "" : ",") + c;
        fail("expected the header '" + want + "'");
      }
      header_seen = true;
      continue;
    }
    if (cells.size() != kColumns.size()) {
      fail("expected " + std::to_string(kColumns.size()) + " columns, found " +
           std::to_string(cells.size()));
    }
    auto integer = [&](size_t col) -> int64_t {
      size_t used = 0;
      int64_t v = 0;
      try {
        v = std::stoll(cells[col], &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != cells[col].size()) {
        fail("column '" + kColumns[col] + "': '" + cells[col] + "' is not an integer");
      }
      return v;
    };
    BenchShape s;
    s.q_len = static_cast<int>(integer(0));
    s.kv_len = static_cast<int>(integer(1));
    if (!parse_mask(cells[2], s.mask)) {
      fail("column 'mask': unknown mask '" + cells[2] +
           "' (expected full, causal, document or causal-offset)");
    }
    s.heads_q = static_cast<int>(integer(3));
    s.heads_kv = static_cast<int>(integer(4));
    s.head_dim = static_cast<int>(integer(5));
    s.q_offset = integer(6);
    s.k_offset = integer(7);
    s.doc_len = static_cast<int>(integer(8));
    s.note = cells[9];
    if (s.q_len <= 0 || s.kv_len <= 0) fail("q_len and kv_len must be positive");
    if (s.heads_q <= 0 || s.heads_kv <= 0 || s.heads_q % s.heads_kv != 0) {
      fail("heads_q must be a positive multiple of heads_kv");
    }
    if (s.head_dim <= 0 || s.head_dim % 8 != 0) fail("head_dim must be a positive multiple of 8");
    if (s.mask == MaskKind::Document && s.doc_len <= 0) fail("a document mask needs doc_len > 0");
    if (s.q_offset < 0 || s.k_offset < 0) fail("offsets must not be negative");
    shapes.push_back(s);
  }
  if (!header_seen) {
    line_no = 0;
    fail("no header line");
  }
  return shapes;
}

std::vector<BenchShape> load_shape_list(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": error: cannot open the shape list");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_shape_list(ss.str(), path);
}

void make_mask(const BenchShape& s, int batch, HostMask& out) {
  out.shape = AttnShape{batch, s.q_len, s.kv_len, s.heads_q, s.heads_kv, s.head_dim};
  out.spec = MaskSpec{};
  out.q_doc.clear();
  out.k_doc.clear();
  switch (s.mask) {
    case MaskKind::Full:
      break;
    case MaskKind::Causal:
      out.spec.causal = true;
      break;
    case MaskKind::CausalOffset:
      out.spec.causal = true;
      out.spec.q_offset = s.q_offset;
      out.spec.k_offset = s.k_offset;
      break;
    case MaskKind::Document:
      out.spec.causal = true;
      out.spec.q_offset = s.q_offset;
      out.spec.k_offset = s.k_offset;
      for (int b = 0; b < batch; ++b) {
        for (int i = 0; i < s.q_len; ++i) {
          out.q_doc.push_back(static_cast<int32_t>((s.q_offset + i) / s.doc_len));
        }
        for (int j = 0; j < s.kv_len; ++j) {
          out.k_doc.push_back(static_cast<int32_t>((s.k_offset + j) / s.doc_len));
        }
      }
      out.spec.q_doc = out.q_doc.data();
      out.spec.k_doc = out.k_doc.data();
      break;
  }
}

const char* profile_csv_header() {
  return "gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,head_dim,"
         "dtype,time_us,tflops,source,commit";
}

std::string format_profile_row(const ProfileRow& r) {
  char nums[160];
  std::snprintf(nums, sizeof nums, "%d,%d,%s,%.6f,%d,%d,%d", r.q_len, r.kv_len, r.mask.c_str(),
                r.unmasked_fraction, r.heads_q, r.heads_kv, r.head_dim);
  char times[96];
  std::snprintf(times, sizeof times, "%.3f,%.2f", r.time_us, r.tflops);
  return r.gpu + "," + r.kernel + "," + r.direction + "," + nums + "," + r.dtype + "," + times +
         "," + r.source + "," + r.commit;
}

}  // namespace cpsim::kernels
