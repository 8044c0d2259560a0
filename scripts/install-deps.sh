#!/usr/bin/env bash
# Installs the Debian 12 packages cpsim needs, only those missing. Needs root (or sudo).
#   scripts/install-deps.sh           # what building and running cpsim needs (setup.sh)
#   scripts/install-deps.sh --tests   # also what test.sh needs: GoogleTest, Slurm and munge
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      libsimgrid-dev libboost-graph-dev libyaml-cpp-dev
      nlohmann-json3-dev libcli11-dev libspdlog-dev python3 python3-matplotlib)
case "${1:-}" in
  "") ;;
  --tests) pkgs+=(libgtest-dev slurm-wlm munge) ;;  # slurm-wlm, munge: tests/slurm (one-node cluster)
  *) echo "usage: scripts/install-deps.sh [--tests]" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root (missing: ${missing[*]})" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
