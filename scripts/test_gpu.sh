#!/usr/bin/env bash
# CUDA check on the machine's NVIDIA GPU: build pyggml_opt with CUDA for this card's architecture
# only, then
#   1. tests/api/test_backends.py (backend names, sessions) against the CUDA build;
#   2. ggml's test-backend-ops on CUDA0 for the ops pyggml_opt's graphs use: `support` (which ops the
#      CUDA backend takes), `test` (CUDA against the CPU) and, with PGO_GPU_GRAD=1, `grad`;
#   3. scripts/backend_report.py --backend cuda: which backend the scheduler gives each op of the
#      training graphs (MLP, CNN, every other layer kind; CPU fallbacks marked), and a Fashion-MNIST
#      MLP fit on CUDA against the CPU (s/epoch, test accuracy).
#
#   bash scripts/test_gpu.sh                 # everything
#   PGO_GPU_OPS_TESTS=0 bash scripts/test_gpu.sh   # skip building / running test-backend-ops
#
# The build is kept small so that it takes minutes: one CUDA architecture (nvidia-smi's compute_cap
# of GPU 0, or CUDA_ARCH=90), one CPU library for this CPU's instruction sets (the default without
# PYGGML_OPT_PORTABLE) instead of the release wheel's 14 variants, no FlashAttention kernels (GGML_CUDA_FA=OFF: training never uses them), no NCCL, no
# fatbin compression. It goes to its own build folder (build/cuda-sm<arch>) and virtual environment
# (build/cuda-venv, which also sees the interpreter's site-packages: numpy, cffi, scikit-build-core,
# pytest must be there or installable), so the wheel's build folder is not touched. Both are kept, so
# a second run rebuilds only what changed.
#
# Environment: CUDA_ARCH (e.g. 90; default from nvidia-smi), CUDACXX (nvcc; default PATH or
# /usr/local/cuda/bin/nvcc), PGO_FASHION_MNIST_DIR (the four IDX files; default .data/fashion-mnist in
# the repository when present, else Debian's, else the bundled 6000-image subset), PGO_GPU_EPOCHS
# (default 5), PGO_WHEELHOUSE (a folder of wheels to install missing Python packages from, offline),
# PGO_GPU_OUT (folder for logs and the JSON report; default build/gpu-report), PGO_GPU_BUILD_DIR and
# PGO_GPU_VENV (the build folder and venv above), PGO_GPU_GRAD=1 (also test-backend-ops grad on CUDA0).
# Exit status: 0 all passed; 1 a test failed; 2 no GPU / no CUDA toolkit (nothing was tested).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PY="${PYTHON:-python3}"

no() { echo "test_gpu.sh: $*" >&2; exit 2; }

# ---- the card and the toolkit ------------------------------------------------------------------
command -v nvidia-smi >/dev/null 2>&1 \
    || no "nvidia-smi not found: this machine has no NVIDIA GPU driver, so there is nothing to test here. Run it on a machine with an NVIDIA GPU and the CUDA toolkit (nvcc, cuBLAS)."
nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version --format=csv,noheader >/dev/null 2>&1 \
    || no "nvidia-smi finds no usable GPU: $(nvidia-smi -L 2>&1 | head -n 3)"
echo "== GPU"
nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version --format=csv,noheader | sed 's/^/   /'
cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' ')"
arch="${CUDA_ARCH:-${cc/./}}"
[[ "$arch" =~ ^[0-9]{2,3}[af]?$ ]] || no "cannot read the compute capability (nvidia-smi says '$cc'); set CUDA_ARCH, e.g. CUDA_ARCH=90"

NVCC="${CUDACXX:-$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)}"
[ -x "$NVCC" ] || no "nvcc not found (PATH, CUDACXX, /usr/local/cuda/bin): install the CUDA toolkit"
cuda_ver="$("$NVCC" --version 2>/dev/null | grep -oE 'release [0-9]+\.[0-9]+' | cut -d' ' -f2 || true)"
[ -n "$cuda_ver" ] || no "$NVCC --version does not report a CUDA release: not a working nvcc"
# the toolkit's own nvcc (/usr/local/bin/nvcc may be a link or a wrapper script): nvcc names it
here="$(cd "${TMPDIR:-/tmp}" && "$NVCC" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ _HERE_=//p' | head -n 1 || true)"
[ -n "$here" ] && [ -x "$here/nvcc" ] && NVCC="$here/nvcc"
cuda_root="$(cd "$(dirname "$(readlink -f "$NVCC")")/.." && pwd)"
# ggml-cuda links cuBLAS: a toolkit with only nvcc and cudart configures but does not generate
cublas="$(find "$cuda_root"/lib64/ "$cuda_root"/targets/*/lib/ -maxdepth 1 -name 'libcublas.so*' 2>/dev/null | head -n 1 || true)"
if [ -z "$cublas" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so'; then
    no "cuBLAS (libcublas.so) not found next to $NVCC or by ldconfig: install the toolkit's cuBLAS (e.g. libcublas-dev-<ver>)"
fi
"$NVCC" --list-gpu-arch 2>/dev/null | grep -q "compute_${arch%[a-z]}" \
    || no "nvcc $cuda_ver cannot compile for compute_${arch%[a-z]} (its --list-gpu-arch: $("$NVCC" --list-gpu-arch 2>/dev/null | tr '\n' ' '))"
echo "   architecture sm_$arch, nvcc $cuda_ver ($NVCC)"

# ---- the build --------------------------------------------------------------------------------
BUILD="${PGO_GPU_BUILD_DIR:-$ROOT/build/cuda-sm$arch}"
VENV="${PGO_GPU_VENV:-$ROOT/build/cuda-venv}"
OUT="${PGO_GPU_OUT:-$ROOT/build/gpu-report}"
mkdir -p "$OUT"
[ -x "$VENV/bin/python" ] || "$PY" -m venv --system-site-packages "$VENV"
VPY="$VENV/bin/python"
need=()
for mod in scikit_build_core cffi numpy pytest; do
    "$VPY" -c "import $mod" 2>/dev/null || need+=("${mod//_/-}")
done
if [ "${#need[@]}" -gt 0 ]; then
    echo "== installing ${need[*]} into $VENV"
    if [ -n "${PGO_WHEELHOUSE:-}" ]; then
        "$VPY" -m pip install -q --no-index --find-links "$PGO_WHEELHOUSE" "${need[@]}"
    else
        "$VPY" -m pip install -q "${need[@]}"
    fi
fi
command -v cmake >/dev/null 2>&1 || "$VPY" -c "import cmake" 2>/dev/null \
    || no "cmake not found (>= 3.21; pip install cmake)"

ops_tests="${PGO_GPU_OPS_TESTS:-1}"
defs=(-C "build-dir=$BUILD"
      -C cmake.define.GGML_CUDA=ON -C "cmake.define.CMAKE_CUDA_ARCHITECTURES=$arch" -C "cmake.define.CMAKE_CUDA_COMPILER=$NVCC"
      -C cmake.define.GGML_CUDA_FA=OFF -C cmake.define.GGML_CUDA_NCCL=OFF -C cmake.define.GGML_CUDA_COMPRESSION_MODE=none)
[ "$ops_tests" = 1 ] && defs+=(-C cmake.define.PYGGML_OPT_BUILD_TESTS=ON)
echo "== building with CUDA into $BUILD ($(nproc) jobs)"
echo "   ${defs[*]}"
t0=$SECONDS
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    "$VPY" -m pip install -v --no-build-isolation --no-deps --no-cache-dir . "${defs[@]}" >"$OUT/build.log" 2>&1 \
    || { tail -n 60 "$OUT/build.log"; echo "FAIL: CUDA build (log: $OUT/build.log)" >&2; exit 1; }
echo "   built and installed in $((SECONDS - t0)) s"

failed=()
# ---- 1. the devices and tests/api/test_backends.py -------------------------------------------------
echo "== devices"
(cd "$OUT" && "$VPY" - <<'EOF') || { echo "FAIL: the CUDA build has no CUDA device" >&2; exit 1; }
import sys, pyggml_opt as pgo
from pyggml_opt.core import find_device
from pyggml_opt._lib import c_str, lib
print(f"   pyggml_opt from {pgo.__file__}")
for d in pgo.devices():
    print(f"   {d.name:8s} {d.type:6s} {d.description} ({d.memory_free / 2**30:.1f} of {d.memory_total / 2**30:.1f} GiB free)")
for name in ("cuda", "CUDA:0", "gpu", "CUDA0"):
    print(f"   {name!r} -> {c_str(lib.ggml_backend_dev_name(find_device(name)))}")
sys.exit(0 if any(d.name.startswith("CUDA") for d in pgo.devices()) else 1)
EOF
echo "== tests/api/test_backends.py"
(cd tests && "$VPY" -m pytest -q -rs -p no:cacheprovider api/test_backends.py 2>&1 | tail -n 15) | sed 's/^/   /'
[ "${PIPESTATUS[0]}" = 0 ] || failed+=("tests/api/test_backends.py")

# ---- 2. test-backend-ops on CUDA0 for the ops the training graphs use --------------------------
# (scripts/backend_report.py lists them: MLP, CNN, and the composed activations / LayerNorm / losses)
OPS="ADD,SUB,MUL,DIV,SCALE,SQR,SQRT,LOG,EXP,NEG,ABS,SUM,SUM_ROWS,MEAN,ARGMAX,COUNT_EQUAL,REPEAT,REPEAT_BACK,CONT,CPY,GET_ROWS,MUL_MAT,OUT_PROD,SOFT_MAX,SOFTPLUS,SIGMOID,RELU,SILU,SILU_BACK,STEP,CROSS_ENTROPY_LOSS,CROSS_ENTROPY_LOSS_BACK,OPT_STEP_ADAMW,OPT_STEP_SGD,IM2COL,IM2COL_BACK,POOL_2D,POOL_2D_BACK,CONV_2D"
if [ "$ops_tests" = 1 ]; then
    TBO="$BUILD/bin/test-backend-ops"
    [ -x "$TBO" ] || { echo "FAIL: $TBO was not built" >&2; exit 1; }
    echo "== test-backend-ops support -b CUDA0 (which of our ops the CUDA backend takes)"
    "$TBO" support -b CUDA0 -o "$OPS" --output csv >"$OUT/support.csv" 2>"$OUT/support.log" || true
    "$VPY" - "$OUT/support.csv" "$OPS" <<'EOF' | sed 's/^/   /'
import csv, re, sys
from collections import defaultdict
# ggml-opt trains in f32: count the cases whose tensor types are all f32 (i32 for indices) apart
types = re.compile(r"\btype\w*=(\w+)")
sup = defaultdict(lambda: [0, 0, 0, 0])  # f32 yes, f32 no, any yes, any no
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("test_mode") != "support":
        continue
    ok = r.get("supported", "").strip().lower() in ("1", "true", "yes")
    f32 = all(t in ("f32", "i32") for t in types.findall(r.get("op_params", "")))
    s = sup[r.get("op_name", "")]
    if f32:
        s[0 if ok else 1] += 1
    s[2 if ok else 3] += 1
def state(yes, no):
    if yes + no == 0:
        return "no cases"
    return "all" if no == 0 else ("NONE: CPU fallback" if yes == 0 else f"{yes} of {yes + no}")
print(f"{'op':26s} {'f32 cases on CUDA0':20s} all types")
for op in sys.argv[2].split(","):
    fy, fn, ay, an = sup.get(op, [0, 0, 0, 0])
    print(f"{op:26s} {state(fy, fn):20s} {state(ay, an)}")
EOF
    echo "== test-backend-ops test -b CUDA0 (CUDA against the CPU)"
    if "$TBO" test -b CUDA0 -o "$OPS" >"$OUT/test-backend-ops.log" 2>&1; then
        grep -E "tests passed|Backend CUDA0|OK$" "$OUT/test-backend-ops.log" | tail -n 3 | sed 's/^/   /'
    else
        grep -E "FAIL|tests passed" "$OUT/test-backend-ops.log" | head -n 40 | sed 's/^/   /'
        failed+=("test-backend-ops test -b CUDA0 ($OUT/test-backend-ops.log)")
    fi
    if [ "${PGO_GPU_GRAD:-0}" = 1 ]; then
        echo "== test-backend-ops grad -b CUDA0 (backward passes against finite differences; report only)"
        "$TBO" grad -b CUDA0 -o "$OPS" >"$OUT/grad.log" 2>&1 || true
        grep -E "FAIL|tests passed" "$OUT/grad.log" | head -n 40 | sed 's/^/   /'
    fi
fi

# ---- 3. fallbacks per op and speed against the CPU ----------------------------------------------
data_args=()
data_dir="${PGO_FASHION_MNIST_DIR:-}"
[ -z "$data_dir" ] && [ -d "$ROOT/.data/fashion-mnist" ] && data_dir="$ROOT/.data/fashion-mnist"
[ -n "$data_dir" ] && data_args=(--data "$data_dir")
echo "== scripts/backend_report.py --backend cuda"
(cd "$OUT" && "$VPY" "$ROOT/scripts/backend_report.py" --backend cuda --epochs "${PGO_GPU_EPOCHS:-5}" \
    "${data_args[@]}" --json "$OUT/backend_report.json") 2>&1 | sed 's/^/   /'
[ "${PIPESTATUS[0]}" = 0 ] || failed+=("scripts/backend_report.py")

echo "== logs and report: $OUT"
if [ "${#failed[@]}" -gt 0 ]; then
    printf 'FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "== all GPU checks passed"
