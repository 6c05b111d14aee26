#!/usr/bin/env bash
# A sanitizer run: builds c10d_func instrumented with ASan or TSan into build/<kind> (its own
# folder, so the normal build stays), runs the multi-process suite on it with the sanitizer
# runtime preloaded into python (neither python nor libtorch is instrumented), then re-installs
# the normal build. Reports go to the terminal; the run fails if the suite fails.
#   bash scripts/sanitize.sh address|thread [pytest args, default: a short multi-process subset]
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:?usage: scripts/sanitize.sh address|thread [pytest args]}"
shift
[[ $kind == address || $kind == thread ]] || { echo "address or thread, not '$kind'" >&2; exit 2; }
bash scripts/install.sh >/dev/null
# shellcheck disable=SC1091
source .venv/bin/activate

restore() {
  echo "sanitize.sh: re-installing the normal build"
  pip install -q --no-build-isolation -e . >/dev/null
}
trap restore EXIT

echo "sanitize.sh: building with -fsanitize=$kind into build/$kind"
C10D_FUNC_SANITIZE="$kind" C10D_FUNC_BUILD_TESTS=OFF \
  pip install -q --no-build-isolation -e . -Cbuild-dir="build/$kind"

runtime="$(g++ -print-file-name="$([[ $kind == address ]] && echo libasan.so || echo libtsan.so)")"
[[ -f $runtime ]] || { echo "sanitize.sh: no sanitizer runtime at $runtime" >&2; exit 1; }
if [[ $kind == address ]]; then
  # Leak checking would report every allocation python and libtorch never free at exit.
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:print_summary=1"
else
  # libtorch and gloo are not instrumented: their internal synchronisation is invisible to
  # TSan, so reports whose frames are all theirs are suppressed (tests/sanitizers/tsan.supp).
  export TSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/tsan.supp:report_signal_unsafe=0:halt_on_error=0"
  # torch's intra-op threads are libgomp's, whose barriers TSan cannot see: a kernel's parallel
  # reads of a buffer look unordered with the next write of the thread that waited for them.
  # One intra-op thread runs every kernel on its caller, where TSan sees the order.
  export OMP_NUM_THREADS=1
  # A TSan rank takes about 2.5 GB: keep fewer pools alive at once.
  export C10D_FUNC_TEST_MAX_CACHED_RANKS="${C10D_FUNC_TEST_MAX_CACHED_RANKS:-4}"
fi
# SANITIZER_LOG_DIR: every process (ranks on test hosts included) writes its reports whole to a
# file of its own there (report.<pid>), where a test would show only the end of a rank's output.
if [[ -n ${SANITIZER_LOG_DIR:-} ]]; then
  mkdir -p "$SANITIZER_LOG_DIR"
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$SANITIZER_LOG_DIR/report"
  export TSAN_OPTIONS="${TSAN_OPTIONS:-}:log_path=$SANITIZER_LOG_DIR/report"
fi
# Every rank and program in an interpreter of its own, as the sanitizer runtime expects: not
# forked from the tests' preloaded server (tests/python/preloaded.py), which imported torch
# before OMP_NUM_THREADS was read and holds a thread of its own (TSan refuses threads after a
# fork of a threaded process).
export C10D_FUNC_TEST_FRESH_INTERPRETERS=1
# Instrumented code runs several times slower: the tests' own bounds stretch by this much
# (tests/python/worker_pool.py), so that a run fails on findings, not on the clock.
export C10D_FUNC_TEST_SLOWDOWN="${C10D_FUNC_TEST_SLOWDOWN:-$([[ $kind == address ]] && echo 3 || echo 8)}"
tests=("$@")
if ((${#tests[@]} == 0)); then
  tests=(tests/python/test_collectives.py tests/python/test_world.py tests/python/test_reliability.py)
fi
# The workers inherit LD_PRELOAD. libstdc++ is preloaded too: the sanitizer's exception
# interceptors must find it at start-up, before torch loads it. The timeout stays generous for
# the slower instrumented code.
LD_PRELOAD="$runtime $(g++ -print-file-name=libstdc++.so)" C10D_FUNC_TIMEOUT=120 \
  python -m pytest -q -p no:cacheprovider "${tests[@]}"
