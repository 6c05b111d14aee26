#!/usr/bin/env bash
# Formats the C++ sources with clang-format (.clang-format, close to PyTorch's; Debian's
# clang-format package) and the Python ones with ruff.
#   bash scripts/format.sh           rewrite every file in place
#   bash scripts/format.sh --check   change nothing; fail listing the C++ files that differ (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format.sh: apt-get install clang-format"; exit 1; }
mapfile -t sources < <(git ls-files '*.cpp' '*.h' '*.cu')
if [ "${1:-}" = "--check" ]; then
  unformatted=()
  for file in "${sources[@]}"; do
    clang-format --dry-run --Werror "$file" >/dev/null 2>&1 || unformatted+=("$file")
  done
  if ((${#unformatted[@]})); then
    echo "format.sh: not formatted (run bash scripts/format.sh): ${unformatted[*]}"
    exit 1
  fi
  echo "format.sh: ${#sources[@]} C++ files formatted"
  exit 0
fi
clang-format -i "${sources[@]}"
.venv/bin/python -m ruff --version >/dev/null 2>&1 || .venv/bin/python -m pip install -q ruff
.venv/bin/python -m ruff format python tests benchmarks
.venv/bin/python -m ruff check --fix python tests benchmarks
