#include "app/slurm.hpp"

#include <cstdio>
#include <sstream>

namespace cpsim::app::slurm {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  const size_t b = s.find_first_not_of(" \n");
  return b == std::string::npos ? "" : s.substr(b);
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

std::string array_list(const std::vector<size_t>& indices) {
  std::string out;
  for (size_t a = 0; a < indices.size();) {
    size_t b = a;
    while (b + 1 < indices.size() && indices[b + 1] == indices[b] + 1) ++b;
    if (!out.empty()) out += ",";
    out += std::to_string(indices[a]);
    if (b > a) {  // appended: GCC 12 -O3's false -Wrestrict on "..." + std::string&& (bug 105651)
      out += '-';
      out += std::to_string(indices[b]);
    }
    a = b + 1;
  }
  return out;
}

std::string batch_script(const ArrayJob& job) {
  const std::string k = std::to_string(job.shards);
  std::ostringstream s;
  s << "#!/bin/bash\n"
    << "# Written by `cpsim sweep --slurm`. Array task i runs shard i of " << k << " of the sweep:\n"
    << "# its rows go to results.i-of-" << k << ".csv and its results to runs/<id>.json in\n"
    << "# " << job.out_dir << " (a shared filesystem).\n"
    << "# Then: cpsim sweep --merge " << shell_quote(job.out_dir) << "\n"
    << "#SBATCH --job-name=" << job.job_name << "\n"
    << "#SBATCH --array=0-" << job.shards - 1 << "\n"
    << "#SBATCH --output=" << job.out_dir << "/slurm-%A_%a.out\n"
    << "#SBATCH --ntasks=1\n"
    << "#SBATCH --cpus-per-task=" << job.cpus_per_task << "\n"
    << "#SBATCH --export=ALL\n";
  if (!job.partition.empty()) s << "#SBATCH --partition=" << job.partition << "\n";
  if (!job.time_limit.empty()) s << "#SBATCH --time=" << job.time_limit << "\n";
  for (const auto& a : job.sbatch_args) s << "#SBATCH " << a << "\n";
  s << "exec " << shell_quote(job.cpsim) << " sweep " << shell_quote(job.sweep_file)
    << " --shard \"${SLURM_ARRAY_TASK_ID}/" << k << "\" -o " << shell_quote(job.out_dir) << " -j "
    << job.cpus_per_task << " --timeout " << format_seconds(job.timeout_s) << " --resume";
  for (const auto& set : job.sets) s << " " << shell_quote("--set=" + set);
  s << "\n";
  return s.str();
}

Submitted submit(pool::Runner& runner, const std::string& script_path, const std::string& array) {
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  if (!array.empty()) argv.push_back("--array=" + array);
  argv.push_back(script_path);
  const pool::Captured r = runner.capture(argv);
  Submitted s;
  const std::string out = trim(r.out);
  // --parsable prints "jobid" or "jobid;cluster".
  const std::string id = out.substr(0, out.find(';'));
  if (r.rc == 0 && !id.empty() && id.find_first_not_of("0123456789") == std::string::npos) {
    s.ok = true;
    s.job_id = id;
    return s;
  }
  s.error = trim(r.err.empty() ? r.out : r.err);
  if (r.rc == 127) s.error = "cannot run sbatch (is Slurm's client installed and on PATH?): " + s.error;
  else if (s.error.empty()) s.error = "sbatch exited with code " + std::to_string(r.rc) + " and printed no job id";
  return s;
}

QueueState query(pool::Runner& runner, const std::string& job_id) {
  const pool::Captured r = runner.capture({"squeue", "--noheader", "--array", "--jobs=" + job_id, "--format=%t"});
  QueueState q;
  if (r.rc != 0) {
    // A job that left slurmctld's memory is an error to squeue; it is simply done.
    if (r.err.find("Invalid job id") != std::string::npos) {
      q.answered = true;
      return q;
    }
    q.error = trim(r.err.empty() ? r.out : r.err);
    if (r.rc == 127) q.error = "cannot run squeue (is Slurm's client installed and on PATH?): " + q.error;
    if (q.error.empty()) q.error = "squeue exited with code " + std::to_string(r.rc);
    return q;
  }
  q.answered = true;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (line.empty()) continue;
    if (line == "PD") ++q.pending;
    else ++q.running;
  }
  return q;
}

}  // namespace cpsim::app::slurm
