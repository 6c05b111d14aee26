#!/usr/bin/env bash
# Formats C++ (clang-format, from Debian's clang-format package) and Python (ruff).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "apt-get install clang-format"; exit 1; }
git ls-files '*.cpp' '*.h' | xargs clang-format -i
.venv/bin/python -m ruff --version >/dev/null 2>&1 || .venv/bin/python -m pip install -q ruff
.venv/bin/python -m ruff format python tests benchmarks
.venv/bin/python -m ruff check --fix python tests benchmarks
