#!/usr/bin/env bash
# The GPU check: installs the gpu extra where there is a GPU, runs the jitted core's tests on
# it, measures CartpoleBalance (ours and Brax, Playground's GPU settings) and WalkerWalk, and
# writes one JSON (default bench/results/gpu-check.json). Without a GPU it writes a "no GPU"
# result in seconds. Wheels in .whl/ (for a machine without the package index) are used
# when present. Usage: bash bench/gpu_check.sh [OUT.json]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench/results/gpu-check.json}"
python="${NNX_PPO_PYTHON:-python3}"
if [ -x .venv/bin/python ]; then python=.venv/bin/python; fi
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  if [ -d .whl ]; then
    "$python" -m pip install -q --no-index --find-links .whl -e ".[gpu,bench]"
  else
    "$python" -m pip install -q -e ".[gpu,bench]"
  fi
  export JAX_PLATFORMS=cuda MUJOCO_GL=egl
fi
exec timeout 480 "$python" -m bench.gpu_check "$out"
