#!/usr/bin/env bash
# Installs what is missing on a fresh Debian 12 machine and builds c10d_func into .venv: system
# packages (compiler, CMake, clang-format, GoogleTest, Gloo's headers), a virtual environment
# with the pinned torch and the build/test tools, then an editable build (incremental: build/
# is reused).
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION="${C10D_FUNC_TORCH_VERSION:-2.14.1}"

missing=()
command -v g++ >/dev/null || missing+=(g++)
command -v cmake >/dev/null || missing+=(cmake)
command -v clang-format >/dev/null || missing+=(clang-format)
[ -f /usr/lib/x86_64-linux-gnu/cmake/GTest/GTestConfig.cmake ] || \
  [ -f /usr/lib/cmake/GTest/GTestConfig.cmake ] || missing+=(libgtest-dev)
python3 -c "import venv, ensurepip" 2>/dev/null || missing+=(python3-venv)
# Gloo's headers (torch's wheel has none): the Gloo transport is then made in C++.
[ -f /usr/include/gloo/algorithm.h ] || missing+=(libgloo-dev)
# nlohmann/json, which torch's flight recorder header includes and torch's wheel does not ship.
[ -f /usr/include/nlohmann/json.hpp ] || missing+=(nlohmann-json3-dev)
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "install.sh: apt-get install ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
# shellcheck disable=SC1091
source .venv/bin/activate
python -m pip install -q --disable-pip-version-check "torch==${TORCH_VERSION}" -r requirements-dev.txt

# Compile the CUDA sources whenever torch has CUDA and nvcc is there; CI forces it ON so the CUDA
# side cannot rot unnoticed.
export C10D_FUNC_WITH_CUDA="${C10D_FUNC_WITH_CUDA:-AUTO}"
echo "install.sh: building c10d_func (CUDA kernels: ${C10D_FUNC_WITH_CUDA})"
python -m pip install -q --disable-pip-version-check --no-build-isolation -e . \
  -Cbuild.verbose=false
python -c "import c10d_func, torch; print('install.sh: ok,', torch.ops.c10d_func.all_reduce)"
