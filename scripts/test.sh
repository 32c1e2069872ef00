#!/usr/bin/env bash
# Build and install the package with its C-level tests (test-opt, test-backend-ops, ggml's mnist
# tools), then run every test: pytest runs the Python tests and, through tests/test_c_level.py, ctest.
#
# Everything runs, including the test marked `slow` (the 30-epoch CNN accuracy target on
# Fashion-MNIST, ~9 min on 2 cores); PYGGML_OPT_FAST=1 leaves it out. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -v . -C cmake.define.PYGGML_OPT_BUILD_TESTS=ON 2>&1 | tail -n 3
# the build folder pip just used: the newest one with C-level tests (not scripts/test_sanitize.sh's)
newest="$(ls -dt "$PWD"/build/*/CTestTestfile.cmake 2>/dev/null | grep -v "/build/asan/" | head -n 1 || true)"
export PYGGML_OPT_BUILD_DIR="${PYGGML_OPT_BUILD_DIR:-${newest%/CTestTestfile.cmake}}"
marker=()
if [ "${PYGGML_OPT_FAST:-0}" = "1" ]; then marker=(-m "not slow"); fi
# Run from outside the source tree so `import pyggml_opt` is the installed package.
cd tests && python3 -m pytest -q -rs --durations=15 "${marker[@]}" "$@"
