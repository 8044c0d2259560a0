#include "app/slurm.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace cpsim::app::slurm {

namespace {

struct CommandResult {
  int rc = -1;  ///< exit code; 127 when the program could not be executed
  std::string out, err;
};

/// Runs argv[0] (looked up on PATH) with stdin from /dev/null, collecting stdout and stderr.
CommandResult run_command(const std::vector<std::string>& argv) {
  CommandResult r;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    r.err = std::strerror(errno);
    return r;
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.err = std::strerror(errno);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return r;
  }
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& s : args) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execvp(cargv[0], cargv.data());
    const std::string msg = std::string(cargv[0]) + ": " + std::strerror(errno) + "\n";
    [[maybe_unused]] const ssize_t w = ::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    r.err = std::string("fork: ") + std::strerror(errno);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return r;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[k]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

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

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                                        "_-./=:,+@%") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string array_list(const std::vector<size_t>& indices) {
  std::string out;
  for (size_t a = 0; a < indices.size();) {
    size_t b = a;
    while (b + 1 < indices.size() && indices[b + 1] == indices[b] + 1) ++b;
    if (!out.empty()) out += ",";
    out += std::to_string(indices[a]);
    if (b > a) out += "-" + std::to_string(indices[b]);
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

Submitted submit(const std::string& script_path, const std::string& array) {
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  if (!array.empty()) argv.push_back("--array=" + array);
  argv.push_back(script_path);
  const CommandResult r = run_command(argv);
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

QueueState query(const std::string& job_id) {
  const CommandResult r = run_command({"squeue", "--noheader", "--array", "--jobs=" + job_id, "--format=%t"});
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
