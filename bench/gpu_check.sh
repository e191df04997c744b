#!/usr/bin/env bash
# The GPU check for a bare GPU machine (no network): installs the wheels of .whl/ (made here by
# bench/gpu_bundle.sh; carry .whl with the tree) with pip --no-index --no-deps into a target
# directory on PYTHONPATH, next to the machine's own JAX (and what .whl/from-index.txt names
# from the machine's own package index, where it has one), then runs bench.gpu_check: one JSON
# rewritten after every step, and a log; at most 9 minutes in all. Without a GPU the GPU steps
# are recorded as skipped. Usage: bash bench/gpu_check.sh OUT.json [LOG [bench.gpu_check options]]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench/results/gpu-check.json}"
log="${2:-${out%.json}.log}"
python="${NNX_PPO_PYTHON:-python3}"
site="${NNX_PPO_GPU_SITE:-}"  # an empty or new directory; default: a fresh temporary one
if [ -z "$site" ]; then site="$(mktemp -d "${TMPDIR:-/tmp}/nnx-ppo-gpu-site.XXXXXX")"; fi
t0=$(date +%s)  # 9 minutes in all (NNX_PPO_GPU_CHECK_SECONDS), the install included
mkdir -p "$(dirname "$out")" "$(dirname "$log")"
: > "$log"
export NNX_PPO_GPU_BUNDLE="none: no .whl/, using what is installed"
if compgen -G ".whl/*.whl" > /dev/null; then
  if [ -n "$(ls -A "$site" 2>/dev/null)" ]; then echo "$site is not empty" >&2; exit 2; fi
  start=$(date +%s)
  if "$python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps \
      --target "$site" .whl/*.whl >> "$log" 2>&1; then
    NNX_PPO_GPU_BUNDLE="$(ls .whl/*.whl | wc -l) wheels into $site in $(( $(date +%s) - start )) s"
  else
    NNX_PPO_GPU_BUNDLE="pip install from .whl/ failed (see the log)"
  fi
  index="${NNX_PPO_LOCAL_INDEX:-/opt/pypi/simple}"  # the machine's own package index
  if [ -s .whl/from-index.txt ] && [ -d "$index" ]; then
    if PIP_CONFIG_FILE=/dev/null "$python" -m pip install --quiet --isolated --no-deps \
        --only-binary=:all: --index-url "file://$index" --target "$site" \
        $(cat .whl/from-index.txt) >> "$log" 2>&1; then
      NNX_PPO_GPU_BUNDLE="$NNX_PPO_GPU_BUNDLE; from $index: $(tr '\n' ' ' < .whl/from-index.txt)"
    else
      NNX_PPO_GPU_BUNDLE="$NNX_PPO_GPU_BUNDLE; pip install from $index failed (see the log)"
    fi
  fi
fi
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
echo "[gpu-check] bundle: $NNX_PPO_GPU_BUNDLE" >> "$log"
budget=$(( ${NNX_PPO_GPU_CHECK_SECONDS:-525} - ($(date +%s) - t0) ))
timeout -k 5 $(( budget + 10 )) "$python" -m bench.gpu_check "$out" --budget-s "$budget" "${@:3}" 2>> "$log"
