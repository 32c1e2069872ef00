#!/usr/bin/env python3
"""Re-vendor ggml: a release tag of the ggml repository, or the ggml inside the llama.cpp that an
sdist of ``llama-cpp-python`` on PyPI carries (with ggml's tests and examples from a ggml tag).

Usage::

    # ggml inside llama-cpp-python 0.3.36's llama.cpp; tests/, examples/, LICENSE from ggml's v0.21.0
    python scripts/vendor_ggml.py --llama-cpp-python 0.3.36 --extras https://github.com/ggml-org/ggml v0.21.0
    # the same from an sdist already downloaded and a local clone of ggml (offline)
    python scripts/vendor_ggml.py --llama-cpp-python 0.3.36 --sdist llama_cpp_python-0.3.36.tar.gz \\
        --extras /path/to/a/clone/of/ggml v0.21.0
    # a tagged ggml release as a whole
    python scripts/vendor_ggml.py --git https://github.com/ggml-org/ggml v0.21.0

Steps:
  1. ``--git``: ``git archive`` of the tag (from a local clone, or a shallow clone of the URL); the
     tar's sha256 and the tag's commit identify the source (``git archive`` of one commit is the same
     tar on every machine).
     ``--llama-cpp-python``: ``pip download`` its sdist (no wheels, no dependencies; or ``--sdist``),
     hash it and take ``vendor/llama.cpp/ggml/`` (CMakeLists.txt, cmake/, include/, src/). That copy
     has no tests, examples or licence files: ``EXTRAS`` come from the ggml tag given to ``--extras``
     (``git archive`` as above).
  2. Delete what the project never builds (see ``TRIM`` below); the rest stays byte-for-byte upstream.
  3. Replace ``vendor/ggml/`` and rewrite ``vendor/VENDORED.md`` with origin, version and checksums
     (of the sources and of the vendored tree: ``TREE_CHECKSUM``); its patch table (the section from
     ``PATCH_TABLE`` on) is kept as it was.

Patches to ggml never go into ``vendor/ggml/``: they live in ``vendor/patches/`` and are applied by the
build (see ``vendor/patches/README.md``), so this script can run again at any time.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "vendor" / "ggml"
GGML_URL = "https://github.com/ggml-org/ggml"

# Paths (relative to vendor/ggml) removed after unpacking: backends, docs and examples we never build.
TRIM = [
    "ci", "docs", "scripts", "requirements.txt", "CONTRIBUTING.md", ".github",
    "src/ggml-cann", "src/ggml-et", "src/ggml-hexagon", "src/ggml-hip", "src/ggml-musa", "src/ggml-opencl",
    "src/ggml-openvino", "src/ggml-sycl", "src/ggml-virtgpu", "src/ggml-vulkan", "src/ggml-webgpu",
    "src/ggml-zdnn", "src/ggml-zendnn",
    "examples/gpt-2", "examples/gpt-j", "examples/magika", "examples/perf-metal", "examples/prompts",
    "examples/python", "examples/sam", "examples/simple", "examples/test-cmake", "examples/yolo",
    "examples/stb_image.h", "examples/stb_image_write.h", "examples/common-ggml.cpp",
    "examples/common-ggml.h",
]
# In tests/ only these files are kept.
KEEP_TESTS = {"test-opt.cpp", "test-backend-ops.cpp"}
# What a llama.cpp copy of ggml lacks, taken from a ggml release tag (tests/ and examples/ trimmed as above;
# ggml.pc.in: ggml's CMakeLists.txt names it).
EXTRAS = ["tests", "examples", "LICENSE", "AUTHORS", "ggml.pc.in"]
# The sdist's copy of ggml.
SDIST_GGML = Path("vendor") / "llama.cpp" / "ggml"
# VENDORED.md from this heading on is the project's own (each patch's upstream status): kept on re-vendoring.
PATCH_TABLE = "## Patches and their upstream status"
# The vendored tree's checksum, as this shell command computes it.
TREE_CHECKSUM = "cd vendor/ggml && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum"


def download_sdist(version: str, into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "--no-build-isolation", "-d", str(into), f"llama-cpp-python=={version}"],
        check=True,
    )
    (sdist,) = into.glob("llama_cpp_python-*.tar.gz")
    return sdist


def ggml_version(root: Path) -> str:
    text = (root / "CMakeLists.txt").read_text()
    parts = [re.search(rf"set\(GGML_VERSION_{p}\s+(\d+)\)", text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def git_archive(repo: str, tag: str, into: Path) -> tuple[Path, str, str]:
    """``tag`` of ``repo`` (a local clone or a URL) unpacked under ``into``: its folder, the tar's
    sha256 and the tag's commit."""
    if not Path(repo).exists():
        clone = into / "clone.git"
        subprocess.run(["git", "clone", "--quiet", "--bare", "--depth", "1", "--branch", tag, repo, str(clone)],
                       check=True)
        repo = str(clone)
    commit = subprocess.run(["git", "-C", repo, "rev-parse", f"{tag}^{{commit}}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    tar = subprocess.run(["git", "-C", repo, "archive", "--format=tar", tag], check=True, capture_output=True).stdout
    out = into / f"git-{tag}"
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(out, filter="data")
    return out, hashlib.sha256(tar).hexdigest(), commit


def trim(src: Path) -> None:
    for rel in TRIM:
        p = src / rel
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    for p in (src / "tests").iterdir():
        if p.name not in KEEP_TESTS:
            p.unlink() if p.is_file() else shutil.rmtree(p)


def tree_sha256(root: Path) -> str:
    """sha256 of ``sha256sum``'s lines for every file under ``root``, in byte order (``TREE_CHECKSUM``)."""
    files = sorted((p for p in root.rglob("*") if p.is_file()),
                   key=lambda p: ("./" + p.relative_to(root).as_posix()).encode())
    lines = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  ./{p.relative_to(root).as_posix()}\n"
                    for p in files)
    return hashlib.sha256(lines.encode()).hexdigest()


def display(repo: str) -> str:
    return GGML_URL if Path(repo).exists() else repo


def from_llama_cpp_python(args: argparse.Namespace, tmp: Path) -> tuple[Path, list[str], str]:
    """ggml from the sdist plus EXTRAS from the ggml tag: the tree, VENDORED.md's origin rows, the command."""
    sdist = args.sdist or download_sdist(args.llama_cpp_python, tmp)
    sdist_sha = hashlib.sha256(sdist.read_bytes()).hexdigest()
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp / "sdist", filter="data")
    (top,) = (tmp / "sdist").iterdir()
    src = top / SDIST_GGML
    extras_repo, extras_tag = args.extras
    extras, extras_sha, extras_commit = git_archive(extras_repo, extras_tag, tmp)
    for rel in EXTRAS:
        if (src / rel).exists():
            raise SystemExit(f"{sdist.name} has {SDIST_GGML / rel}: decide which copy to keep")
        (shutil.copytree if (extras / rel).is_dir() else shutil.copy2)(extras / rel, src / rel)
    rows = [
        f"| origin | `{SDIST_GGML}/` of the PyPI sdist `llama-cpp-python=={args.llama_cpp_python}` (`{sdist.name}`): "
        f"CMakeLists.txt, cmake/, include/, src/ |",
        f"| sdist sha256 | `{sdist_sha}` |",
        f"| {', '.join(f'`{e}`' for e in EXTRAS)} | tag `{extras_tag}` of {display(extras_repo)} (commit "
        f"`{extras_commit}`): the sdist has no ggml tests, examples or licence files |",
        f"| `git archive --format=tar {extras_tag}` sha256 | `{extras_sha}` |",
    ]
    command = (f"python scripts/vendor_ggml.py --llama-cpp-python {args.llama_cpp_python} "
               f"--extras {display(extras_repo)} {extras_tag}")
    return src, rows, command


def from_git(args: argparse.Namespace, tmp: Path) -> tuple[Path, list[str], str]:
    """A whole ggml release tag: the tree, VENDORED.md's origin rows, the command."""
    repo, tag = args.git
    src, sha, commit = git_archive(repo, tag, tmp)
    rows = [f"| origin | tag `{tag}` of {display(repo)} (commit `{commit}`), as `git archive --format=tar {tag}` |",
            f"| tar sha256 | `{sha}` |"]
    return src, rows, f"python scripts/vendor_ggml.py --git {display(repo)} {tag}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--llama-cpp-python", metavar="VERSION",
                        help="the ggml in this llama-cpp-python sdist's llama.cpp (needs --extras)")
    source.add_argument("--git", nargs=2, metavar=("REPO", "TAG"), help="a whole ggml tag: a URL or a local clone")
    ap.add_argument("--sdist", type=Path, help="use this llama-cpp-python sdist instead of downloading it")
    ap.add_argument("--extras", nargs=2, metavar=("REPO", "TAG"),
                    help=f"the ggml tag {', '.join(EXTRAS)} come from (with --llama-cpp-python)")
    args = ap.parse_args()
    if args.llama_cpp_python and not args.extras:
        ap.error("--llama-cpp-python needs --extras REPO TAG (the sdist has no ggml tests or examples)")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src, rows, command = (from_llama_cpp_python if args.llama_cpp_python else from_git)(args, tmp)
        trim(src)
        version = ggml_version(src)
        if DEST.exists():
            shutil.rmtree(DEST)
        shutil.copytree(src, DEST)
    tree = tree_sha256(DEST)

    vendored = ROOT / "vendor" / "VENDORED.md"
    old = vendored.read_text() if vendored.exists() else ""
    table = old[old.index(PATCH_TABLE):] if PATCH_TABLE in old else f"{PATCH_TABLE}\n\n(none yet)\n"
    kept_tests = ", ".join(sorted(KEEP_TESTS))
    trimmed = "\n".join(f"- `{t}`" for t in TRIM)
    origin = "\n".join(rows)
    vendored.write_text(f"""# Vendored ggml

| | |
|---|---|
{origin}
| ggml version | {version} |
| vendored tree sha256 | `{tree}` |
| licence | MIT, `vendor/ggml/LICENSE` (authors in `vendor/ggml/AUTHORS`) |

The vendored tree sha256 is what `{TREE_CHECKSUM}` prints.

Files under `vendor/ggml/` are byte-for-byte upstream; nothing in it is edited by hand.
Changes to ggml live as documented patch files in `vendor/patches/`.

Re-vendor (or upgrade) with one command:

    {command}

## Trimmed (never built by this project)
{trimmed}
- `tests/`: everything except {kept_tests}

Kept: `CMakeLists.txt`, `cmake/`, `include/` (all public headers: ggml's CMake lists them all),
`src/` (core, CPU, CUDA, Metal, BLAS and RPC backends), `tests/` as above and `examples/mnist` with
`examples/common.*` (the reference C++ trainer), LICENSE, AUTHORS.

{table}""")
    print(f"vendored ggml {version} (tree sha256 {tree})")


if __name__ == "__main__":
    main()
