#!/usr/bin/env bash
# README command (2): installs and builds (scripts/install.sh), then runs every test: the
# formatting check, the layout check (scripts/check_layout.sh), the GoogleTest suite through
# ctest (and once more built with ASan+UBSan), and the pytest suite (real multi-process runs over
# shm and Gloo).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# shellcheck disable=SC1091
source .venv/bin/activate

echo "== formatting (clang-format)"
bash scripts/format.sh --check

echo "== layout (transports a strict tree, no library file over 500 lines)"
bash scripts/check_layout.sh

echo "== GoogleTest (ctest)"
ctest --test-dir build/editable --output-on-failure --timeout 120

echo "== GoogleTest under ASan+UBSan (tests/cpp, with the fuzzed parsers of peer data)"
# The torch-free rules and their tests only: a minute's build in a folder of its own.
cmake -S . -B build/asan-cpp -G Ninja -DC10D_FUNC_SANITIZE=address \
  -DC10D_FUNC_WITH_CUDA="${C10D_FUNC_WITH_CUDA:-AUTO}" \
  -DPython3_EXECUTABLE="$(command -v python)" >build/asan-cpp.log 2>&1 ||
  { tail -n 40 build/asan-cpp.log; exit 1; }
cmake --build build/asan-cpp --target c10d_func_cpp_tests >>build/asan-cpp.log 2>&1 ||
  { tail -n 40 build/asan-cpp.log; exit 1; }
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 build/asan-cpp/c10d_func_cpp_tests \
  --gtest_brief=1

echo "== pytest"
exec python -m pytest tests/python -q -p no:cacheprovider --durations=30 "$@"
