#!/usr/bin/env bash
# Build and install the package with its C-level tests (test-opt, test-backend-ops, ggml's mnist
# tools), then run every test: pytest runs the Python tests and, through tests/test_c_level.py, ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -v . -C cmake.define.PYGGML_OPT_BUILD_TESTS=ON 2>&1 | tail -n 3
export PYGGML_OPT_BUILD_DIR="${PYGGML_OPT_BUILD_DIR:-$(ls -d "$PWD"/build/*/ | head -n 1)}"
# Run from outside the source tree so `import pyggml_opt` is the installed package.
cd tests && python3 -m pytest -q -rs "$@"
