"""The package type-checks: mypy, configured by mypy.ini at the repository root, finds no error in
src/pyggml_opt (every function annotated; the package ships py.typed).

Needs mypy, in the test extra (``pip install ".[test]"``): without it the test fails, naming it.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_no_errors():
    if importlib.util.find_spec("mypy") is None and sys.version_info < (3, 10):
        pytest.skip("mypy >= 2.4 needs Python >= 3.10 (the test extra installs it there)")
    if importlib.util.find_spec("mypy") is None:
        pytest.fail(f"mypy is not installed: install the test extra, pip install \".[test]\", in the environment "
                    f"of {sys.executable}")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "mypy.ini")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"mypy failed (exit code {proc.returncode}):\n{proc.stdout}{proc.stderr}"
