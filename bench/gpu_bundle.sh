#!/usr/bin/env bash
# Downloads into .whl/ the wheels the bare GPU machine lacks (bench/gpu_wheels.txt: Python
# 3.12, manylinux x86-64, no dependencies resolved there), slims them, and checks that the
# bundle and the working tree fit the 64 MiB the device tool carries (exit 1 if not).
# Run here, where a package index is reachable. Usage: bash bench/gpu_bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python="${NNX_PPO_PYTHON:-python3}"
if [ -x .venv/bin/python ]; then python=.venv/bin/python; fi
rm -rf .whl && mkdir .whl
"$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 --platform any \
  --dest .whl --requirement bench/gpu_wheels.txt
"$python" -m bench.gpu_bundle slim .whl
echo "$(ls .whl/*.whl | wc -l) wheels in .whl/"
"$python" -m bench.gpu_bundle size .whl
