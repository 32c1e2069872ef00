#!/usr/bin/env bash
# The README's test command. Builds and installs the package for this machine's CPU with its C-level
# tests (test-opt, test-backend-ops, ggml's mnist tools) and the test extra (pip install ".[test]":
# pytest and everything the tests use), into the environment of `python3` (an active virtual
# environment's), then runs every test: pytest runs the Python tests and, through
# tests/ggml/test_c_level.py, ctest.
#
# The build shows ninja's [n/N] steps; pip's whole log goes to a file, whose tail is printed when
# the install fails. Everything runs, including the test marked `slow` (the 30-epoch CNN accuracy
# target on Fashion-MNIST); PYGGML_OPT_FAST=1 leaves it out. PYGGML_OPT_REQUIRE_C_TESTS=1 (CI) fails
# the tests that would otherwise skip for want of a C-level test or a Debian data set. Extra
# arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
log="$(mktemp "${TMPDIR:-/tmp}/pyggml_opt-install.XXXXXX.log")"
echo "== pip install \".[test]\" with the C-level tests (pip's log: $log)"
if ! python3 -m pip install -v ".[test]" -C cmake.define.PYGGML_OPT_BUILD_TESTS=ON 2>&1 | tee "$log" \
        | { grep --line-buffered -E '^(Collecting |Successfully installed | *\[[0-9]+/[0-9]+\] )' || true; }; then
    tail -n 60 "$log"
    echo "test.sh: the build or the install failed (pip's log: $log)" >&2
    exit 1
fi
# the build folder pip just used: the newest one with C-level tests (not scripts/test_sanitize.sh's)
newest="$(ls -dt "$PWD"/build/*/CTestTestfile.cmake 2>/dev/null | grep -v "/build/asan/" | head -n 1 || true)"
export PYGGML_OPT_BUILD_DIR="${PYGGML_OPT_BUILD_DIR:-${newest%/CTestTestfile.cmake}}"
marker=()
if [ "${PYGGML_OPT_FAST:-0}" = "1" ]; then marker=(-m "not slow"); fi
# Run from outside the source tree so `import pyggml_opt` is the installed package.
cd tests && python3 -m pytest -q -rs --durations=15 "${marker[@]}" "$@"
