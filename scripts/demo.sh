#!/usr/bin/env bash
# README command (1): installs and builds (scripts/install.sh), then runs the local demo: N CPU
# ranks (default 4) running every operator, checked and timed, printed as a table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
# shellcheck disable=SC1091
source .venv/bin/activate
exec python -m c10d_func.demo --nproc "${NPROC:-4}" "$@"
