#!/usr/bin/env bash
# README command (2): installs and builds (scripts/install.sh), then runs every test: the
# formatting check, the GoogleTest suite through ctest, and the pytest suite (real multi-process
# runs over shm and Gloo).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# shellcheck disable=SC1091
source .venv/bin/activate

echo "== formatting (clang-format)"
bash scripts/format.sh --check

echo "== GoogleTest (ctest)"
ctest --test-dir build/editable --output-on-failure --timeout 120

echo "== pytest"
exec python -m pytest tests/python -q -p no:cacheprovider "$@"
