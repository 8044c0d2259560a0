#pragma once
/// nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf,
/// sendrecv_perf, broadcast_perf, reduce_perf) read into tables: the format nccl-tests'
/// src/common.cu prints (version and "Collective test starting" lines, "# Using devices" with one
/// "#  Rank  N Group ..." line per rank, the out-of-place / in-place table, "# Avg bus
/// bandwidth"), also as mpirun --tag-output and srun --label write it, with NCCL INFO/WARN lines
/// of any rank interleaved. A log may hold several tests one after another.
#include <string>
#include <vector>

namespace cpsim::scenario {

struct NcclLogRow {
  int line = 0;             ///< 1-based line of the row in its file
  double size_bytes = 0;
  double count = 0;
  std::string type, redop;
  int root = -1;
  double time_us = 0, algbw_GBps = 0, busbw_GBps = 0;           ///< out-of-place
  double ip_time_us = 0, ip_algbw_GBps = 0, ip_busbw_GBps = 0;  ///< in-place (0 when absent)
};

struct NcclLog {
  std::string file;
  int first_line = 0;       ///< the test's first line (its "Collective test starting" or table)
  int last_line = 0;        ///< its "# Avg bus bandwidth" line
  std::string program;      ///< "all_reduce_perf", ...
  std::string op;           ///< cpsim's name: allreduce, allgather, reducescatter, alltoall,
                            ///< sendrecv, broadcast, reduce
  int ranks = 0;            ///< distinct "#  Rank N" lines, else NCCL's "nranks N"
  std::string device;       ///< the first rank's device name, e.g. "NVIDIA H100 80GB HBM3"
  std::vector<std::string> hosts;  ///< distinct hosts of the ranks, in order of appearance
  std::string nccl_version; ///< "2.21.5" from "NCCL version" or nccl-library=22105, else ""
  std::vector<NcclLogRow> rows;
  double avg_busbw_GBps = 0;
};

/// The program name -> cpsim op ("all_reduce_perf" -> "allreduce"); "" if unknown.
std::string nccl_test_op(const std::string& program);

/// Every test in `text` (the contents of `file`). `op_hint` (a cpsim op name or "") names the op
/// when the log does not (old nccl-tests print no "Collective test starting" line; the file
/// name is tried next). Throws InputError "file:line: error: ..." for text that is not UTF-8, a
/// table cut off before its "# Avg bus bandwidth", a row that does not parse, a test whose
/// rows change type/redop/root mid-table or whose op cannot be told, and a file with no table.
std::vector<NcclLog> parse_nccl_log(const std::string& text, const std::string& file,
                                    const std::string& op_hint);

/// Reads `path` (a regular file of at most 64 MiB) and parses it.
std::vector<NcclLog> read_nccl_log(const std::string& path, const std::string& op_hint);

}  // namespace cpsim::scenario
