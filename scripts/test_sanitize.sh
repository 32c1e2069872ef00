#!/usr/bin/env bash
# Run the test suite against an AddressSanitizer + UndefinedBehaviorSanitizer build (issue 4).
#
# What it does:
#   1. builds ggml, the cffi extension and the C-level tests with -fsanitize=address,undefined
#      (CMake option PYGGML_OPT_SANITIZE=ON) into build/asan, for this machine's CPU only
#      (GGML_NATIVE=ON, one CPU backend linked into libggml instead of dynamically loaded, which
#      GGML_NATIVE cannot be combined with on x86: the SIMD paths that run here are the ones checked);
#   2. installs it into its own virtual environment, build/asan-venv (it sees the system's numpy,
#      cffi, pytest and hypothesis), so the normal install is left alone;
#   3. runs pytest with libasan preloaded into the Python interpreter (an ASan library must be the
#      first one loaded; python itself is not built with it), so every child process the tests start
#      (fuzz workers, ctest, ggml's test programs) runs sanitized too.
#
# Any ASan report (heap overflow, use after free, double free, ...) or UBSan report aborts the
# process that hit it (halt_on_error=1), so it shows up as a failed test, and the report is on stderr
# (pytest prints it). Leak checking is off: CPython and numpy keep allocations alive until exit by
# design; the lifetime tests measure leaks of our own handles instead (tests/api/test_lifetimes.py).
#
# Usage: bash scripts/test_sanitize.sh [pytest arguments]     e.g. -x, -k lifetimes
#   The test marked slow (30-epoch CNN) is left out; PYGGML_OPT_SLOW=1 includes it. Runs several
#   times as long as the normal suite (ASan checks every memory access of ggml's kernels too).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
venv="$repo/build/asan-venv"
build="$repo/build/asan"

libasan="$(${CC:-gcc} -print-file-name=libasan.so)"
if [ ! -e "$libasan" ]; then
    echo "libasan.so not found (gcc -print-file-name=libasan.so gave '$libasan'); install gcc's libasan" >&2
    exit 1
fi

[ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --no-build-isolation -v . \
    -C build-dir="$build" \
    -C cmake.build-type=RelWithDebInfo \
    -C cmake.define.PYGGML_OPT_SANITIZE=ON \
    -C cmake.define.PYGGML_OPT_BUILD_TESTS=ON \
    -C cmake.define.GGML_NATIVE=ON \
    -C cmake.define.GGML_CPU_ALL_VARIANTS=OFF \
    -C cmake.define.GGML_BACKEND_DL=OFF 2>&1 | tail -n 3

export PYGGML_OPT_BUILD_DIR="$build"
# allocator_may_return_null: a request for an absurd size returns NULL (numpy raises MemoryError), as
# without ASan, instead of ASan aborting; the GGUF fuzz tests feed such sizes on purpose
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:symbolize=1:detect_stack_use_after_return=0:allocator_may_return_null=1"
# tests/ggml/c/ubsan.supp: one known report in upstream test code, explained there
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:suppressions=$repo/tests/ggml/c/ubsan.supp"
marker=(-m "not slow")
if [ "${PYGGML_OPT_SLOW:-0}" = "1" ]; then marker=(); fi
cd tests
LD_PRELOAD="$libasan" "$venv/bin/python" -m pytest -q -rs --durations=15 "${marker[@]}" "$@"
