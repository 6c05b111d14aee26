#!/usr/bin/env bash
# torch's own torch.distributed backend suite (DistributedTest, as torch's CI runs it on Gloo)
# with every group made on backend "c10d_func": tests/torch_suite/. On demand, not in CI: every
# test spawns fresh ranks (20-40 minutes on 2 cores).
#   bash scripts/torch_suite.sh                 # 2 ranks, every test
#   WORLD_SIZE=4 bash scripts/torch_suite.sh    # 4 ranks
#   bash scripts/torch_suite.sh -k all_reduce   # pytest arguments pass through
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x .venv/bin/python ]] || bash scripts/install.sh
# shellcheck disable=SC1091
source .venv/bin/activate
export WORLD_SIZE="${WORLD_SIZE:-2}" BACKEND=gloo
cd tests/torch_suite
exec python -m pytest test_torch_distributed_suite.py -q -p no:cacheprovider -rfEX "$@"
