"""The C-level regression tests (ctest), one pytest test per ctest entry.

They are built only with the CMake option PYGGML_OPT_BUILD_TESTS (tests/ggml/c/CMakeLists.txt): upstream
test-opt, and test-backend-ops in gradient mode per op through tests/ggml/c/run_grad_checks.py.

The build folder is $PYGGML_OPT_BUILD_DIR if set, else the newest build/*/CTestTestfile.cmake under the
repository root. Without a build folder that has tests, the tests are skipped, or fail when
PYGGML_OPT_REQUIRE_C_TESTS=1 (CI sets it, so that a build without tests cannot pass silently).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
HOW_TO_BUILD = (
    "build them with `pip install --no-build-isolation -e . -C cmake.define.PYGGML_OPT_BUILD_TESTS=ON` "
    "(build folder build/<wheel tag>/), or point PYGGML_OPT_BUILD_DIR at a CMake build folder configured "
    "with -DPYGGML_OPT_BUILD_TESTS=ON"
)
# Per ctest entry. On 2 idle cores the slowest grad check takes seconds; while other processes keep
# both cores busy, every tiny multi-threaded graph compute of test-backend-ops waits for a time slice
# and the same check takes minutes (tests/ggml/c/CMakeLists.txt gives each 900 s).
CTEST_TIMEOUT_S = 1200
_CMAKE_REGEX_SPECIAL = re.compile(r"([\\^$.|?*+()\[\]])")


def _find_build_dir() -> tuple[Path | None, str]:
    env = os.environ.get("PYGGML_OPT_BUILD_DIR")
    if env:
        path = Path(env)
        if not (path / "CTestTestfile.cmake").is_file():
            return None, f"PYGGML_OPT_BUILD_DIR={env} has no CTestTestfile.cmake"
        return path, ""
    candidates = sorted((REPO_ROOT / "build").glob("*/CTestTestfile.cmake"), key=lambda p: p.stat().st_mtime)
    if not candidates:
        return None, f"no {REPO_ROOT / 'build'}/*/CTestTestfile.cmake"
    return candidates[-1].parent, ""


def _find_ctest(build_dir: Path) -> str | None:
    found = shutil.which("ctest")
    if found:
        return found
    # The ctest of the cmake that configured this folder (for example pip's cmake package).
    cache = build_dir / "CMakeCache.txt"
    if cache.is_file():
        m = re.search(r"^CMAKE_CTEST_COMMAND:INTERNAL=(.+)$", cache.read_text(errors="replace"), re.M)
        if m and os.access(m.group(1).strip(), os.X_OK):
            return m.group(1).strip()
    return None


def _discover() -> tuple[Path | None, str | None, list[str], str]:
    """(build folder, ctest, ctest entry names, why there are none)."""
    build_dir, why = _find_build_dir()
    if build_dir is None:
        return None, None, [], why
    ctest = _find_ctest(build_dir)
    if ctest is None:
        return build_dir, None, [], "no ctest executable (on PATH or in CMakeCache.txt)"
    try:
        out = subprocess.run([ctest, "-N"], cwd=build_dir, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return build_dir, ctest, [], f"`ctest -N` failed in {build_dir}: {exc}"
    # "  Test  #1: test-opt"
    names = re.findall(r"^\s*Test\s+#\d+: (\S+)\s*$", out.stdout, re.M)
    if not names:
        return build_dir, ctest, [], (f"`ctest -N` lists no tests in {build_dir} (configured without "
                                      f"PYGGML_OPT_BUILD_TESTS?)")
    return build_dir, ctest, names, ""


BUILD_DIR, CTEST, CTEST_NAMES, WHY_NONE = _discover()


def _without_c_tests(msg: str) -> None:
    """Skip (fail under PYGGML_OPT_REQUIRE_C_TESTS=1) a test whose C-level build is missing."""
    if os.environ.get("PYGGML_OPT_REQUIRE_C_TESTS") == "1":
        pytest.fail(msg + " (PYGGML_OPT_REQUIRE_C_TESTS=1 requires them)")
    pytest.skip(msg)


@pytest.mark.parametrize("name", CTEST_NAMES or [pytest.param(None, id="no-c-tests")])
def test_ctest(name):
    if name is None:
        _without_c_tests(f"C-level tests not found: {WHY_NONE}; {HOW_TO_BUILD}")
    regex = "^" + _CMAKE_REGEX_SPECIAL.sub(r"\\\1", name) + "$"
    try:
        proc = subprocess.run(
            [CTEST, "--output-on-failure", "--timeout", str(CTEST_TIMEOUT_S), "-R", regex],
            cwd=BUILD_DIR, capture_output=True, text=True, timeout=CTEST_TIMEOUT_S + 60,
        )
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail(f"ctest {name} did not finish within {CTEST_TIMEOUT_S + 60} s:\n{partial}")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"ctest {name} failed in {BUILD_DIR} (exit {proc.returncode}):\n{output}"
    # ctest exits 0 with "No tests were found" when the regex matches nothing.
    # ("100% tests passed out of 1" or, older ctest, "100% tests passed, 0 tests failed out of 1")
    assert re.search(r"100% tests passed(, 0 tests failed)? out of 1\b", output), \
        f"ctest {name}: unexpected summary in {BUILD_DIR}:\n{output}"


# --------------------------------------------------------------------------------------------------
# The driver of the grad checks, tests/ggml/c/run_grad_checks.py, on canned test-backend-ops output (these
# run without a build).
# --------------------------------------------------------------------------------------------------
def _load_grad_driver():
    import importlib.util

    name = "_pyggml_opt_run_grad_checks"
    if name not in sys.modules:
        path = REPO_ROOT / "tests" / "ggml" / "c" / "run_grad_checks.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve annotations through sys.modules
        spec.loader.exec_module(module)
    return sys.modules[name]


_GREEN, _RED, _RESET = "\x1b[1;32m", "\x1b[1;31m", "\x1b[0m"
_CANNED = f"""load_backend: loaded CPU backend from libggml-cpu-haswell.so
Testing 1 devices

Backend 1/1: CPU
  Device description: AMD EPYC

  SUM(type=f16,ne=[10,5,4,3]): not supported [out->type != FP32]
  SUM(type=f32,ne=[10,5,4,3]): {_GREEN}OK{_RESET}
  SUM(type=f32,ne=[10,5,4,3]): {_GREEN}OK{_RESET}
  ADD(type=f32,ne=[1,1,1,1],nr=[32,1,1,1]): {_GREEN}OK{_RESET}
  ADD(type=f32,ne=[1,1,1,1],nr=[32,1,1,1]): not supported [ADD]
  ADD(type=f32,ne=[10,5,4,3],nr=[2,1,1,1]): {_GREEN}OK{_RESET}
  SUM(type=f32,ne=[10,5,4,3],nr=[2,1,1,1]): {_GREEN}OK{_RESET}
  ADD(type=f32,ne=[1,1,320,320]): {_GREEN}OK{_RESET}
  ADD(type=f32,ne=[1,1,320,320]): skipping large tensors for speed 
  SUM(type=f32,ne=[33,256,1,1],permute=[1,0,2,3]): {_GREEN}OK{_RESET}
  SUM(type=f32,ne=[33,256,1,1],permute=[1,0,2,3]): [SUM] MAA = 0.996977786 > 0.000100000 {_RED}FAIL{_RESET}
  SUM(type=f32,ne=[33,256,1,1],permute=[1,0,2,3]): compare failed {_RED}FAIL{_RESET}
  LOG(type=f32,ne=[10,5,4,3]): {_GREEN}OK{_RESET}
  SUM(type=f32,ne=[10,5,4,3]): [SUM] nonfinite gradient at index 3 (CPU=nan) {_RED}FAIL{_RESET}
  SUM(type=f32,ne=[10,5,4,3]): compare failed {_RED}FAIL{_RESET}
  6/9 tests passed
  Backend CPU: {_RED}FAIL{_RESET}
1/1 backends passed
"""


def test_grad_driver_parses_console_output():
    drv = _load_grad_driver()
    res = drv.parse_stream(iter(_CANNED.splitlines(keepends=True)))
    got = [(c.op, c.status, c.kind) for c in res.cases]
    assert got == [
        ("SUM", "unsupported", None),
        ("SUM", "pass", None),
        ("ADD", "unsupported", None),
        ("ADD", "pass", None),
        ("ADD", "large", None),
        ("SUM", "fail", "maa"),
        ("LOG", "fail", "nonfinite"),
    ]
    assert res.cases[5].maa == 0.996977786
    assert res.summary == (6, 9)


def test_grad_driver_crash_is_the_open_case():
    drv = _load_grad_driver()
    # stdout of an abort: the last header was flushed without its status
    lines = [f"  SCALE(scale=2.0,inplace=0): {_GREEN}OK{_RESET}\n", f"  SUM(scale=2.0,inplace=0): {_GREEN}OK{_RESET}\n",
             "  SCALE(scale=2.0,inplace=1): "]
    res = drv.parse_stream(iter(lines))
    assert [(c.params, c.status) for c in res.cases] == [("scale=2.0,inplace=0", "pass"),
                                                         ("scale=2.0,inplace=1", "crash")]
    known = drv.KNOWN_FAILURES["SCALE"]
    assert any(k.matches(res.cases[1]) for k in known)


def test_grad_driver_known_failure_matching():
    drv = _load_grad_driver()
    case = drv.Case("MUL_MAT", "type_a=f32,type_b=f32,m=16,n=4,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1",
                    status="fail", kind="maa", maa=2e-4)
    assert any(k.matches(case) for k in drv.KNOWN_FAILURES["MUL_MAT"])
    case.maa = 0.5  # far beyond finite-difference noise: a real regression, not the known failure
    assert not any(k.matches(case) for k in drv.KNOWN_FAILURES["MUL_MAT"])
    case.kind, case.maa = "nonfinite", None
    assert not any(k.matches(case) for k in drv.KNOWN_FAILURES["MUL_MAT"])


def test_grad_driver_params_filter():
    drv = _load_grad_driver()
    rx = drv.build_params_filter("mask=0,", ["a=[1,2],b=0.5"], ["inplace=1"])
    # ECMAScript and Python agree on this subset (lookaheads, escapes)
    assert re.search(rx, "mask=0,x=1,inplace=0")
    assert not re.search(rx, "mask=0,x=1,inplace=1")
    assert not re.search(rx, "mask=1,x=1,inplace=0")
    assert not re.search(rx, "a=[1,2],b=0.5")
    assert drv.build_params_filter(None, [], []) is None


# A stand-in for test-backend-ops in grad mode: one RMS_NORM case and one ADD case, whose RMS_NORM case
# fails with a finite-difference error in the runs listed in $FAKE_FAILING_RUNS (counted in $FAKE_COUNTER).
_FAKE_GRAD = '''
import os, re, sys
counter = os.environ["FAKE_COUNTER"]
run = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
open(counter, "w").write(str(run))
failing = {int(r) for r in os.environ["FAKE_FAILING_RUNS"].split(",") if r}
args = sys.argv[1:]
params = args[args.index("-p") + 1] if "-p" in args else None
cases = [("RMS_NORM", "type=f32,ne=[33,5,4,3],eps=0.000100"), ("ADD", "type=f32,ne=[10,5,4,3]")]
n_ok = 0
for op, p in cases:
    if params is not None and not re.search(params, p):
        continue
    print(f"  {op}({p}): OK")
    if op == "RMS_NORM" and run in failing:
        print(f"  SUM({p}): [SUM] MAA = 0.001175979 > 0.000100000 FAIL")
        print(f"  SUM({p}): compare failed FAIL")
    else:
        print(f"  SUM({p}): OK")
        n_ok += 1
n = sum(params is None or re.search(params, p) is not None for _, p in cases)
print(f"  {n_ok}/{n} tests passed")
sys.exit(0 if n_ok == n else 1)
'''


@pytest.mark.parametrize("failing_runs, status, tag, runs", [
    ("1", 0, "NOISE maa", 3),      # the first run fails, both reruns of the case alone pass
    ("1,3", 1, "NEW maa", 3),      # the second rerun fails: reproduced
    ("1,2", 1, "NEW maa", 2),      # the first rerun fails: reproduced, no second rerun
])
def test_grad_driver_reruns_an_unlisted_precision_failure(tmp_path, monkeypatch, capsys, failing_runs, status,
                                                          tag, runs):
    drv = _load_grad_driver()
    exe = tmp_path / "test-backend-ops"
    exe.write_text(f"#!{sys.executable}\n{_FAKE_GRAD}")
    exe.chmod(0o755)
    monkeypatch.setenv("FAKE_COUNTER", str(tmp_path / "runs"))
    monkeypatch.setenv("FAKE_FAILING_RUNS", failing_runs)
    monkeypatch.setattr(drv, "KNOWN_FAILURES", {})
    assert drv.check(str(exe), "RMS_NORM", "CPU", None, timeout=60, verbose=False) == status
    out = capsys.readouterr().out
    assert f"  {tag:<16} RMS_NORM(type=f32,ne=[33,5,4,3],eps=0.000100) (" in out
    assert int((tmp_path / "runs").read_text()) == runs


def test_grad_driver_rerun_tells_a_wrong_gradient_from_noise():
    """On the real test-backend-ops: SUM of a transposed view has a wrong CPU forward (its table entry),
    so its finite differences disagree with backprop in every rerun; NEG's gradient (-1 everywhere, whose
    finite differences are exact to ~1e-5) passes its reruns, as a case that failed by noise does."""
    exe = BUILD_DIR / "bin" / "test-backend-ops" if BUILD_DIR is not None else None
    if exe is None or not os.access(exe, os.X_OK):
        _without_c_tests(f"test-backend-ops not built: {WHY_NONE or 'no bin/test-backend-ops'}; {HOW_TO_BUILD}")
    drv = _load_grad_driver()
    wrong = drv.Case("SUM", "type=f32,ne=[33,256,1,1],permute=[1,0,2,3]", status="fail", kind="maa")
    assert drv.reproduces(str(exe), "CPU", wrong, timeout=120)
    right = drv.Case("NEG", "type=f32,ne_a=[128,2,2,2],v=0", status="fail", kind="maa")
    assert not drv.reproduces(str(exe), "CPU", right, timeout=120)
