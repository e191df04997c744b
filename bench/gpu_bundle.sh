#!/usr/bin/env bash
# Downloads into .whl/ the wheels a bare accelerator machine lacks (manylinux x86-64, no
# dependencies resolved there), slims them, and checks that the bundle and the working tree
# fit the 64 MiB the device tool carries (exit 1 if not). Run here, where a package index is
# reachable. Usage: bash bench/gpu_bundle.sh [LIST]
#   the GPU machine (Python 3.12):  bash bench/gpu_bundle.sh                 (bench/gpu_wheels.txt)
#   the TPU machine (Python 3.11):  NNX_PPO_BUNDLE_PYTHON=3.11 bash bench/gpu_bundle.sh bench/tpu_wheels.txt
set -euo pipefail
cd "$(dirname "$0")/.."
list="${1:-bench/gpu_wheels.txt}"
version="${NNX_PPO_BUNDLE_PYTHON:-3.12}"
abi="cp${version/./}"
python="${NNX_PPO_PYTHON:-python3}"
if [ -x .venv/bin/python ]; then python=.venv/bin/python; fi
rm -rf .whl && mkdir .whl
"$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version "$version" --implementation cp --abi "$abi" --abi abi3 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 --platform any \
  --dest .whl --requirement "$list"
"$python" -m bench.gpu_bundle slim .whl
index_list="${list%wheels.txt}index.txt"  # names to install from the machine's own index
if [ -f "$index_list" ]; then grep -v '^#' "$index_list" > .whl/from-index.txt; fi
echo "$(ls .whl/*.whl | wc -l) wheels in .whl/"
"$python" -m bench.gpu_bundle size .whl
