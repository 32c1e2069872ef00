"""Test cases that may kill the interpreter (an abort, a segfault) run in a child process: the child
reads one JSON case per line and answers "BEGIN", then one JSON line {"ok": bool, "error": str | None}
(``serve``); the test's ``Worker`` keeps one child for many cases and starts another after a crash,
which it reports as the failure of the case that was running."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from . import child_env

ALLOWED = (ValueError, TypeError)  # the errors bad input may raise; any other exception fails a case


class Worker:
    """A child running ``script`` (which calls ``serve``), restarted when it dies."""

    def __init__(self, script: Path) -> None:
        self.script = script
        self.proc: subprocess.Popen | None = None

    def run(self, case: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, str(self.script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, bufsize=1, env=child_env())
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        begin = self.proc.stdout.readline()
        line = self.proc.stdout.readline()
        if not begin.startswith("BEGIN") or not line:
            code = self.proc.wait(timeout=30)
            err = self.proc.stderr.read()[-2000:]
            self.proc = None
            return {"ok": False, "error": f"child died with code {code}: {err}"}
        return json.loads(line)

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def serve(run: Callable[[dict], Any]) -> None:
    """The child's loop: ``run`` each case from stdin; its result (None, or a note such as what it
    did) or the name of an ALLOWED error is an "ok" answer, any other exception is not."""
    for line in sys.stdin:
        case = json.loads(line)
        print("BEGIN", flush=True)
        try:
            result = {"ok": True, "error": run(case)}
        except ALLOWED as e:
            result = {"ok": True, "error": type(e).__name__}
        except Exception as e:  # noqa: BLE001 - reported to the parent
            result = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(result), flush=True)


def tallied_worker(script: Path, outcomes: dict, success: str, least: int) -> Iterator[Worker]:
    """A module fixture's body (``yield from``): a ``Worker`` of ``script``; once the cases are done, what
    they did (``outcomes``: outcome -> count, filled by the test) is printed, and at least ``least``
    must have been a ``success`` (a fuzzer whose cases are all refused tests nothing)."""
    w = Worker(script)
    yield w
    w.close()
    print("\nfuzz outcomes:", dict(sorted(outcomes.items(), key=lambda kv: -kv[1])))
    assert outcomes.get(success, 0) >= least, f"too few cases got as far as {success!r}: {outcomes}"
