#!/usr/bin/env bash
# Quick start, step 1: install what is missing, build cpsim, simulate a bundled scenario.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh          # build needs only; test.sh adds --tests (GoogleTest, Slurm, munge)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCPSIM_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)"
echo
echo "+ build/cpsim run scenarios/quickstart.yaml"
build/cpsim run scenarios/quickstart.yaml
