#!/usr/bin/env bash
# The tree's two rules (README, "Layout"), checked by scripts/test.sh:
# - transports are a strict tree: a transport's folder includes the transports' root
#   (transports/*.h) and its own files, never a sibling transport's folder;
# - includes point down the layers (README, "Layout"): transports/ includes nothing above it, and
#   ops/ and runtime/ nothing of the kernels, the backend or python/;
# - no library file (C++ or the Python package) is over 500 lines.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0

for folder in transports/*/; do
  name="$(basename "$folder")"
  while IFS= read -r hit; do
    echo "check_layout: $hit: transports/$name includes a sibling transport folder" >&2
    status=1
  done < <(grep -Hn '#include "transports/[a-z_]*/' "$folder"* |
    grep -v "#include \"transports/$name/" || true)
done

upward() { # folders, then the pattern of what they must not include
  local pattern="$1"
  shift
  while IFS= read -r hit; do
    echo "check_layout: $hit: includes a layer above its own" >&2
    status=1
  done < <(grep -rHnE "#include \"($pattern)/" "$@" || true)
}
upward 'ops|runtime|kernels|meta|autograd|backend|python' transports
upward 'kernels|meta|autograd|backend|python' ops runtime

while IFS= read -r file; do
  lines=$(wc -l <"$file")
  if ((lines > 500)); then
    echo "check_layout: $file has $lines lines (at most 500): split it by responsibility" >&2
    status=1
  fi
done < <(git ls-files -co --exclude-standard ops runtime transports kernels meta autograd backend \
  python/csrc python/c10d_func | grep -E '\.(h|cpp|cu|py)$')
exit $status
