"""Durable saves (pyggml_opt.atomic): every file the package writes (models, checkpoints, IDX data sets)
replaces its target only once written, fsync'ed and closed without error; any write error raises and
leaves the previous file byte for byte; permission bits are kept; temporary files of killed writers are
removed by the next save to the same path.

Faults are injected in subprocesses: one under RLIMIT_FSIZE (a full disk in the last bytes, which
stdio flushes at fclose), and one under tests/integration/fault_shim.c (LD_PRELOAD), which fails one write,
fsync or close of the temporary file per case. The shim is compiled here with gcc: without gcc these
tests fail rather than skip.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt._lib import lib
from pyggml_opt.atomic import atomic_file
from pyggml_opt.core import GGUFFile
from pyggml_opt.data import read_idx, write_idx

HERE = Path(__file__).resolve().parent
SRC = Path(pgo.__file__).resolve().parent.parent

# What the subprocesses share: models whose files (40 KiB, the same size for every seed) take several
# writes of Python's 8 KiB buffer, and end 3840 bytes after a multiple of 4096 (ggml's stdio writer
# held those bytes until fclose, whose error it ignored).
COMMON = r"""
import ctypes, json, os, sys
import numpy as np
import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt.data import write_idx

def model(seed):
    m = pgo.Sequential([L.Linear(6, 1000), L.ReLU(), L.Linear(1000, 3)])
    m.build((6,), seed=seed)
    return m

def images(seed):
    return np.random.default_rng(seed).integers(0, 256, (40, 28, 28), dtype=np.uint8)

def write(kind, path, seed):
    if kind == "model":
        model(seed).save(path)
    else:
        write_idx(path, images(seed), compress=kind == "idx.gz")
"""

# Each case: write the old file, arm the shim for this case's temporary files, write over it, disarm
# and report what happened.
FAULT_WORKER = COMMON + r"""
import hashlib
folder, shim, cases = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
fired = ctypes.CDLL(shim).pgo_fault_fired

def open_files(part):
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # listdir's own
            continue
        if part in target:
            found.append(target)
    return found

results = {}
for i, (case, (kind, fault)) in enumerate(cases.items()):
    path = os.path.join(folder, case)
    write(kind, path, seed=1)
    size = os.path.getsize(path)
    # tensor data: each tensor padded to GGUF's default alignment, 32 bytes
    meta = size - sum(-(-w.nbytes // 32) * 32 for w in model(1).get_weights().values()) if kind == "model" else 0
    if fault.startswith("write:"):
        fault = f"write:{eval(fault[6:], {'size': size, 'meta': meta})}"
    before = hashlib.sha256(open(path, "rb").read()).hexdigest()
    os.environ["PGO_FAULT_MATCH"] = f"/.{case}."
    os.environ["PGO_FAULT"] = f"{fault}#{i}"
    error = None
    try:
        write(kind, path, seed=2)
    except OSError as e:
        error = [type(e).__name__, e.errno, str(e)]
    results[case] = {"fired": bool(fired()), "error": error, "before": before, "open_temps": open_files(f"/.{case}.")}
    os.environ["PGO_FAULT"] = ""
print(json.dumps(results))
"""

# Byte offsets in the file where the disk fills (size: the file's; meta: where tensor data starts).
MODEL_FAULTS = {
    "enospc-magic": "write:0",
    "enospc-header": "write:7",
    "enospc-metadata": "write:meta // 2",
    "enospc-tensor-data-start": "write:meta",
    "enospc-tensor-data": "write:(meta + size) // 2",
    "enospc-last-2000-bytes": "write:size - 2000",
    "enospc-last-byte": "write:size - 1",
    "eio-fsync": "fsync",
    "eio-close": "close",
}
IDX_FAULTS = {
    "enospc-start": "write:0",
    "enospc-middle": "write:size // 2",
    "enospc-last-byte": "write:size - 1",
    "eio-fsync": "fsync",
    "eio-close": "close",
}
CASES = {**{f"model-{name}.gguf": ("model", fault) for name, fault in MODEL_FAULTS.items()},
         **{f"{kind}-{name}.{kind}": (kind, fault) for kind in ("idx", "idx.gz") for name, fault in IDX_FAULTS.items()}}


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(SRC), e.get("PYTHONPATH", "")])
    e.update(extra)
    return e


def run_worker(script: str, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], env=env(**extra_env), capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> str:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is needed to build the fault-injection shim tests/integration/fault_shim.c")
    out = tmp_path_factory.mktemp("shim") / "fault_shim.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-o", str(out), str(HERE / "fault_shim.c"), "-ldl"],
                   check=True)
    return str(out)


@pytest.fixture(scope="module")
def fault_run(shim, tmp_path_factory):
    """All cases in one worker process (the shim re-arms per case): (folder, results by case)."""
    folder = tmp_path_factory.mktemp("faults")
    proc = run_worker(FAULT_WORKER, str(folder), shim, json.dumps(CASES), LD_PRELOAD=shim)
    assert proc.returncode == 0, proc.stderr
    return folder, json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", CASES)
def test_a_failing_write_raises_and_keeps_the_old_file(fault_run, case):
    folder, results = fault_run
    kind, fault = CASES[case]
    result = results[case]
    assert result["fired"], f"the shim never injected {fault} (nothing wrote the temporary file?)"
    assert result["error"] is not None, f"{kind} save returned normally through {fault}"
    assert result["error"][2].endswith(f"{case}'")  # the message names the file
    assert result["open_temps"] == []
    assert hashlib.sha256((folder / case).read_bytes()).hexdigest() == result["before"]
    if kind == "model":
        assert pgo.load(folder / case).count_params() > 0
    else:
        assert read_idx(folder / case).shape == (40, 28, 28)
    assert not [t for t in temp_files(folder) if t.startswith(f".{case}.")]


def test_the_shim_lets_an_unarmed_save_through(shim, tmp_path):
    """The fault cases above fail because of their fault: the same save with nothing armed succeeds."""
    proc = run_worker(COMMON + r"""
path = sys.argv[1]
write("model", path, seed=1)
os.environ["PGO_FAULT_MATCH"] = "/.m.gguf."
write("model", path, seed=2)
""", str(tmp_path / "m.gguf"), LD_PRELOAD=shim)
    assert proc.returncode == 0, proc.stderr
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("gap", [16, 2000])
def test_a_full_disk_in_the_last_bytes_raises_and_keeps_the_old_file(tmp_path, gap):
    """The finding: RLIMIT_FSIZE ``gap`` bytes below the file's size (bytes stdio flushed at fclose,
    whose error gguf_write_to_file ignored) truncated the new file and renamed it over the old one."""
    path = tmp_path / "m.gguf"
    proc = run_worker(COMMON + r"""
import hashlib, resource, signal
path, gap = sys.argv[1], int(sys.argv[2])
write("model", path, seed=1)
print(hashlib.sha256(open(path, "rb").read()).hexdigest())
size = os.path.getsize(path)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (size - gap, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    write("model", path, seed=2)
except OSError as e:
    print("OSError", e.errno, e)
else:
    print("saved")
""", str(path), str(gap))
    assert proc.returncode == 0, proc.stderr
    before, outcome = proc.stdout.splitlines()[-2:]
    assert outcome.startswith(f"OSError {errno.EFBIG} "), outcome
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert pgo.load(path).count_params() > 0
    assert temp_files(tmp_path) == []


def test_a_killed_writer_leaves_a_temporary_file_the_next_save_removes(shim, tmp_path):
    path = tmp_path / "m.gguf"
    proc = run_worker(COMMON + r"""
path = sys.argv[1]
write("model", path, seed=1)
os.environ["PGO_FAULT_MATCH"] = "/.m.gguf."
os.environ["PGO_FAULT"] = "kill"
write("model", path, seed=2)
""", str(path), LD_PRELOAD=shim)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    old = path.read_bytes()
    [left] = temp_files(tmp_path)
    assert re.fullmatch(r"\.m\.gguf\.[0-9a-f]{16}\.pgo\.tmp", left)
    assert (tmp_path / left).stat().st_size == len(old)  # killed at fsync: all written, not renamed
    model = pgo.load(path)
    model.save(path)
    assert temp_files(tmp_path) == []


def test_a_save_removes_only_unlocked_temporary_files_of_its_target(tmp_path):
    path = tmp_path / "m.gguf"
    stale = tmp_path / ".m.gguf.0123456789abcdef.pgo.tmp"
    alive = tmp_path / ".m.gguf.fedcba9876543210.pgo.tmp"
    others = [tmp_path / ".m.gguf.x.0123456789abcdef.pgo.tmp", tmp_path / ".n.gguf.0123456789abcdef.pgo.tmp",
              tmp_path / ".m.gguf.0123456789abcdef.tmp"]
    for p in [stale, alive, *others]:
        p.write_bytes(b"partial")
    fd = os.open(alive, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a writer at work holds it
        write_idx(path, np.arange(10, dtype=np.uint8))
        assert not stale.exists()
        assert alive.exists() and all(p.exists() for p in others)
    finally:
        os.close(fd)
    write_idx(path, np.arange(10, dtype=np.uint8))  # its writer is gone now
    assert not alive.exists()


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444, 0o755])
def test_saving_over_a_file_keeps_its_mode(tmp_path, mode):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"old")
    path.chmod(mode)
    pgo.Sequential([pgo.layers.Linear(2, 2)]).build((2,)).save(path)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert pgo.load(path).count_params() == 6


def test_a_new_file_gets_the_umasks_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_idx(tmp_path / "a.idx", np.zeros(3, np.uint8))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.idx").stat().st_mode) == 0o640


def test_an_exception_in_the_writer_keeps_the_old_file(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="stop"):
        with atomic_file(path) as f:
            f.write(b"new" * 10_000)
            raise RuntimeError("stop")
    assert path.read_bytes() == b"old"
    assert temp_files(tmp_path) == []


def test_gguf_write_matches_ggmls_writer_byte_for_byte(tmp_path):
    rng = np.random.default_rng(0)
    with GGUFFile() as f:
        f.set("general.architecture", "test")
        f.set("a.int", -7)
        f.set("a.float", 0.25)
        f.set("a.flag", True)
        f.set("a.text", "x" * 45)
        for i, shape in enumerate([(3,), (5, 7), (2, 3, 4, 5), (1,), (8,), (1, 1, 9)]):
            f.add_tensor(f"t{i}", rng.normal(size=shape))
        f.write(tmp_path / "ours.gguf")
        assert lib.gguf_write_to_file(f.ptr, str(tmp_path / "ggml.gguf").encode(), False)
    assert (tmp_path / "ours.gguf").read_bytes() == (tmp_path / "ggml.gguf").read_bytes()
    with GGUFFile() as f:
        f.set("only.key", "no tensors")
        f.write(tmp_path / "ours0.gguf")
        assert lib.gguf_write_to_file(f.ptr, str(tmp_path / "ggml0.gguf").encode(), False)
    assert (tmp_path / "ours0.gguf").read_bytes() == (tmp_path / "ggml0.gguf").read_bytes()
