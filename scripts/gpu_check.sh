#!/usr/bin/env bash
# For a GPU machine with torch (and nvcc, CMake, ninja, scikit-build-core, pytest) already
# installed and no network: builds c10d_func in place against that interpreter's torch, then runs
# the CUDA tests and the CUDA benchmark. Logs go to $OUT (or ./gpu_check_out).
#   bash scripts/gpu_check.sh [build|test|ranks|bench|all] [extra pytest args]
# test: tests/python/test_cuda.py (world size 1, NCCL); ranks: tests/python/test_cuda_ranks.py (the
# CPU suite's bodies on CUDA tensors, 2 and 4 processes sharing the GPU over Gloo; the longest).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu_check_out}"
mkdir -p "$out"
what="${1:-all}"
shift || true
py="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
# The GPU image's default CXX (/opt/gcc) links parts of libstdc++ statically into the library, so
# two copies of the iostreams meet in one process and the first ostringstream crashes: build with
# the system compiler, the one torch's wheel is compatible with.
export CXX="${C10D_FUNC_CXX:-/usr/bin/g++}" CUDAHOSTCXX="${C10D_FUNC_CXX:-/usr/bin/g++}"

if [[ $what == build || $what == all ]]; then
  nvidia-smi -L; "$py" -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
  rm -rf build/editable  # a cache made with another compiler would keep it
  C10D_FUNC_WITH_CUDA=ON C10D_FUNC_BUILD_TESTS=OFF TORCH_CUDA_ARCH_LIST="9.0" \
    "$py" -m pip install --no-build-isolation --no-deps --no-index -e . 2>&1 | tee "$out/build.log" | tail -n 40
  "$py" -c "import c10d_func, torch; print('built:', torch.ops.c10d_func.all_reduce)" || exit 1
fi
if [[ $what == test || $what == all ]]; then
  timeout 400 "$py" -m pytest tests/python/test_cuda.py -v -p no:cacheprovider "$@" 2>&1 | tee "$out/test_cuda.log"
fi
if [[ $what == ranks || $what == all ]]; then
  timeout 540 "$py" -m pytest tests/python/test_cuda_ranks.py -v -p no:cacheprovider "$@" 2>&1 | tee "$out/test_cuda_ranks.log"
fi
if [[ $what == bench || $what == all ]]; then
  timeout 300 "$py" -m benchmarks.collectives --device cuda --no-step --out "$out/bench" 2>&1 | tail -n 60
fi
