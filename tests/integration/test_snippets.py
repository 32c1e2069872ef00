"""The documentation's examples run: every ```python block of README.md and docs/**/*.md.

Each page's blocks run in order in one fresh interpreter, as a reader who pastes them one after the
other into a Python session runs them: in ``__main__`` (``__name__ == "__main__"``), in an empty folder
(files the page writes land there), with the installed package. The code keeps the page's line
numbers (every line that is not code of a block is blank) and is compiled under the page's path, so
a traceback names the Markdown file, its line and the code there. As in a session, the main module
is no file that worker processes (Dask's, joblib's) import again.

Short runs without touching the text: the environment sets ``PYGGML_OPT_MAX_EPOCH_STEPS=2``, which
the package's ``fit`` honours by ending every epoch after 2 optimizer steps (and says so in a
warning). Every other line runs as written: the data the page names is loaded (Debian's Fashion-MNIST
and fortunes, the bundled subset, scikit-learn's digits and iris), every call gets the page's
arguments, files are written and read back, the Dask cluster starts. Blocks could instead read a
variable of their own, but then the pages would show code that no reader needs; the test would
edit the text, but then what runs would not be what the page says. A number a page states after
training (an accuracy) is therefore not checked here.

A ```python block that is not meant to run as it stands has, on the line right above its fence, a
comment ``<!-- no-run: <the reason> -->`` (HTML: shown by neither GitHub nor MkDocs); keep them rare.
Pages that read Debian's data sets skip without them, or fail under ``PYGGML_OPT_REQUIRE_C_TESTS=1``
(CI, which installs them).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pyggml_opt as pgo
from pyggml_opt.data import fashion_mnist_available
from pyggml_opt.data.text import DEBIAN_FORTUNES_DIR

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
NO_RUN = re.compile(r"^<!-- no-run: \S.*-->\s*$")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\S*)")
REQUIRE = os.environ.get("PYGGML_OPT_REQUIRE_C_TESTS") == "1"
TIMEOUT_S = 600
# python -c RUNNER <page> <code>: the code runs in __main__'s namespace under the page's name
RUNNER = "import sys; exec(compile(open(sys.argv[2], encoding='utf-8').read(), sys.argv[1], 'exec'))"


def page_script(text: str) -> tuple[str, int]:
    """The page's runnable ```python blocks as one script with the page's line numbers, and how many
    blocks it holds."""
    out: list[str] = []
    lines = text.splitlines()
    fence, run, blocks = None, False, 0
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            run = m.group(2) == "python" and not (i > 0 and NO_RUN.match(lines[i - 1]))
            blocks += run
            out.append("")
        elif fence is not None and line.strip() == fence:
            fence, run = None, False
            out.append("")
        else:
            out.append(line if run else "")
    assert fence is None, "a code block is not closed"
    return "\n".join(out) + "\n", blocks


def test_page_script_keeps_lines_and_skips_marked_blocks():
    text = ("# t\n```python\na = 1\n```\n<!-- no-run: a fragment -->\n```python\nb = undefined\n```\n"
            "```sh\nrm -rf /\n```\n````python\nc = a + 1\n````\n")
    script, blocks = page_script(text)
    assert blocks == 2
    lines = script.splitlines()
    assert len(lines) == len(text.splitlines())
    assert {i + 1: line for i, line in enumerate(lines) if line} == {3: "a = 1", 13: "c = a + 1"}


def _needs(script: str) -> str | None:
    """Why the page cannot run here (a Debian data set it reads is missing), or None."""
    if re.search(r"\bload_fashion_mnist\(", script) and not fashion_mnist_available():
        return "Debian's dataset-fashion-mnist is not installed (apt-get install dataset-fashion-mnist)"
    if "load_fortunes(" in script and not Path(DEBIAN_FORTUNES_DIR).is_dir():
        return "Debian's fortunes are not installed (apt-get install fortunes)"
    return None


@pytest.mark.parametrize("page", [p for p in PAGES if page_script(p.read_text(encoding="utf-8"))[1]],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_page_runs(page, tmp_path):
    script, _ = page_script(page.read_text(encoding="utf-8"))
    reason = _needs(script)
    if reason:
        if REQUIRE:
            pytest.fail(f"{reason} (PYGGML_OPT_REQUIRE_C_TESTS=1)")
        pytest.skip(reason)
    code = tmp_path / "page-code.txt"
    code.write_text(script, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYGGML_OPT_MAX_EPOCH_STEPS="2")
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(page), str(code)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{page.relative_to(ROOT)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"


def test_max_epoch_steps_ends_every_epoch_early(monkeypatch, data):
    x, y = data
    batches = []
    counter = pgo.LambdaCallback(on_batch_end=lambda model, batch, logs: batches.append(batch))
    monkeypatch.setenv("PYGGML_OPT_MAX_EPOCH_STEPS", "2")
    model = pgo.Sequential([pgo.layers.Linear(6, 3)])
    with pytest.warns(RuntimeWarning, match="PYGGML_OPT_MAX_EPOCH_STEPS=2"):
        history = model.fit(x, y, epochs=3, batch_size=16, physical_batch_size=8, verbose=0, callbacks=[counter])
    assert len(history["loss"]) == 3
    assert batches == [0, 1, 2, 3] * 3  # 2 steps of 2 physical batches, in every epoch
    monkeypatch.setenv("PYGGML_OPT_MAX_EPOCH_STEPS", "0")
    with pytest.raises(ValueError, match="PYGGML_OPT_MAX_EPOCH_STEPS"):
        model.fit(x, y, verbose=0)
