#pragma once
/// Command lines printed for pasting (`cpsim run PATH --set ...`, a sweep's points, the Slurm
/// resubmission): every word quoted so that the shell reads it back as one word, whatever it
/// holds (spaces, `$(...)`, quotes, newlines).
#include <string>

namespace cpsim::support {

/// `s` as one POSIX shell word: as it is when made only of characters no shell treats
/// specially (letters, digits, _-./=:,+@%), else in single quotes, each ' written '\''.
std::string shell_quote(const std::string& s);

}  // namespace cpsim::support
