#!/usr/bin/env bash
# Build and install the package with its C-level tests (test-opt, test-backend-ops, ggml's mnist
# tools), then run every test: pytest runs the Python tests and, through tests/test_c_level.py, ctest.
#
# The tests marked `slow` (30-epoch CNN on Fashion-MNIST, CNN cross-evaluation with the C++ tools,
# ~15 min on 2 cores) run only with PYGGML_OPT_SLOW=1. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -v . -C cmake.define.PYGGML_OPT_BUILD_TESTS=ON 2>&1 | tail -n 3
export PYGGML_OPT_BUILD_DIR="${PYGGML_OPT_BUILD_DIR:-$(ls -d "$PWD"/build/*/ | head -n 1)}"
marker=(-m "not slow")
if [ "${PYGGML_OPT_SLOW:-0}" = "1" ]; then marker=(); fi
# Run from outside the source tree so `import pyggml_opt` is the installed package.
cd tests && python3 -m pytest -q -rs --durations=15 "${marker[@]}" "$@"
