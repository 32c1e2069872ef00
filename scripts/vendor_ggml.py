#!/usr/bin/env python3
"""Re-vendor ggml from the sdist of ``ggml-python`` on PyPI.

Usage::

    python scripts/vendor_ggml.py 0.0.45            # download, verify, trim, write VENDORED.md
    python scripts/vendor_ggml.py 0.0.45 --sdist F  # use an already downloaded sdist

Steps:
  1. ``pip download`` the sdist of ``ggml-python==VERSION`` (no wheels, no dependencies).
  2. Hash it (sha256) and unpack its ``vendor/ggml/`` folder.
  3. Delete what the project never builds (see ``TRIM`` below); the rest stays byte-for-byte upstream.
  4. Replace ``vendor/ggml/`` and rewrite ``vendor/VENDORED.md`` with origin, version and checksum.

Patches to ggml never go into ``vendor/ggml/``: they live in ``vendor/patches/`` and are applied by the
build (see ``vendor/patches/README.md``), so this script can run again at any time.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "vendor" / "ggml"

# Paths (relative to vendor/ggml) removed after unpacking: backends, docs and examples we never build.
TRIM = [
    "ci", "docs", "scripts", "requirements.txt", "CONTRIBUTING.md", ".github",
    "src/ggml-cann", "src/ggml-hexagon", "src/ggml-hip", "src/ggml-musa", "src/ggml-opencl",
    "src/ggml-openvino", "src/ggml-sycl", "src/ggml-virtgpu", "src/ggml-vulkan", "src/ggml-webgpu",
    "src/ggml-zdnn", "src/ggml-zendnn",
    "examples/gpt-2", "examples/gpt-j", "examples/magika", "examples/perf-metal", "examples/prompts",
    "examples/python", "examples/sam", "examples/simple", "examples/test-cmake", "examples/yolo",
    "examples/stb_image.h", "examples/stb_image_write.h", "examples/common-ggml.cpp",
    "examples/common-ggml.h",
]
# In tests/ only these files are kept.
KEEP_TESTS = {"test-opt.cpp", "test-backend-ops.cpp"}


def download(version: str, into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "--no-build-isolation", "-d", str(into), f"ggml-python=={version}"],
        check=True,
    )
    (sdist,) = into.glob("ggml_python-*.tar.gz")
    return sdist


def ggml_version(root: Path) -> str:
    text = (root / "CMakeLists.txt").read_text()
    parts = [re.search(rf"set\(GGML_VERSION_{p}\s+(\d+)\)", text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("version", help="ggml-python version on PyPI, e.g. 0.0.45")
    ap.add_argument("--sdist", type=Path, help="use this sdist instead of downloading it")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sdist = args.sdist or download(args.version, tmp)
        sha256 = hashlib.sha256(sdist.read_bytes()).hexdigest()
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp / "x", filter="data")
        (top,) = (tmp / "x").iterdir()
        src = top / "vendor" / "ggml"
        for rel in TRIM:
            p = src / rel
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
        for p in (src / "tests").iterdir():
            if p.name not in KEEP_TESTS:
                p.unlink() if p.is_file() else shutil.rmtree(p)
        version = ggml_version(src)
        if DEST.exists():
            shutil.rmtree(DEST)
        shutil.copytree(src, DEST)

    kept_tests = ", ".join(sorted(KEEP_TESTS))
    trimmed = "\n".join(f"- `{t}`" for t in TRIM)
    (ROOT / "vendor" / "VENDORED.md").write_text(f"""# Vendored ggml

| | |
|---|---|
| origin | `vendor/ggml/` of the PyPI sdist `ggml-python=={args.version}` (`{sdist.name}`) |
| ggml version | {version} |
| sdist sha256 | `{sha256}` |
| licence | MIT, `vendor/ggml/LICENSE` (authors in `vendor/ggml/AUTHORS`) |

Files under `vendor/ggml/` are byte-for-byte upstream; nothing in it is edited by hand.
Changes to ggml live as documented patch files in `vendor/patches/`.

Re-vendor (or upgrade) with one command:

    python scripts/vendor_ggml.py {args.version}

## Trimmed (never built by this project)
{trimmed}
- `tests/`: everything except {kept_tests}

Kept: `CMakeLists.txt`, `cmake/`, `include/` (all public headers: ggml's CMake lists them all),
`src/` (core, CPU, CUDA, Metal, BLAS and RPC backends), `examples/mnist` with `examples/common.*`
(the reference C++ trainer), LICENSE, AUTHORS, README.md.
""")
    print(f"vendored ggml {version} from ggml-python {args.version} (sha256 {sha256})")


if __name__ == "__main__":
    main()
