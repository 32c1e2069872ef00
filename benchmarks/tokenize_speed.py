"""Tokenizing speed: pgo.text.GGUFTokenizer against llama-cpp-python's tokenizer (llama.cpp's, through
``Llama(vocab_only=True).tokenize``) on the same 10 MB of text and the same vocabulary, one thread each,
in one run; the two produce the same ids (checked, printed).

The text: Debian's fortunes (prose, verse, dialogue), then the Python standard library's source (code,
with its indentation runs, docstrings, some non-ASCII) up to ``--megabytes``: nothing repeated, so
that a tokenizer's caches see what they would on a real corpus. The vocabularies: llama.cpp's own ``ggml-vocab-*.gguf``
files of the llama-cpp-python 0.3.36 sdist (``--vocab-dir``; the tests fetch it into
``~/.cache/pyggml_opt/llama_cpp_python-0.3.36/vendor/llama.cpp/models``): byte-level BPE (``llama-bpe``,
Llama 3's; ``qwen2``), SentencePiece (``llama-spm``, Llama 2's), Gemma 4's BPE (``gemma-4``). Timed: one
call on the whole text, best of ``--repeats``, the two alternated.

    pip install ".[test]"
    python benchmarks/tokenize_speed.py                # ~2 min
    python benchmarks/tokenize_speed.py --vocab llama-spm --megabytes 1
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # Hugging Face tokenizers: one thread, as llama.cpp's
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pyggml_opt as pgo  # noqa: E402
from pyggml_opt.data.text import load_fortunes  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from machine import cpu_name  # noqa: E402

VOCAB_DIR = Path.home() / ".cache" / "pyggml_opt" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp" / "models"


def corpus(megabytes: float) -> str:
    """Fortunes, then the standard library's Python files, to ``megabytes`` MB of UTF-8."""
    texts, _, _ = load_fortunes()
    parts, size, limit = ["\n%\n".join(texts)], 0, int(megabytes * 1e6)
    size = len(parts[0].encode())
    for path in sorted(Path(os.__file__).parent.rglob("*.py")):
        if size >= limit:
            break
        try:
            parts.append(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        size += len(parts[-1].encode())
    return "".join(parts).encode()[:limit].decode(errors="ignore")


def best(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", action="append", help="ggml-vocab-<name>.gguf (repeatable; default: four)")
    ap.add_argument("--vocab-dir", type=Path, default=VOCAB_DIR)
    ap.add_argument("--megabytes", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    import llama_cpp  # the peer; an ImportError says what to install

    text = corpus(args.megabytes)
    print(f"CPU: {cpu_name()}, one thread each; {len(text.encode()) / 1e6:.1f} MB of text (fortunes, Python's library); "
          f"llama-cpp-python {llama_cpp.__version__}")
    print(f"{'vocabulary':12s} {'model':7s} {'tokens':>10s} {'pyggml_opt':>14s} {'llama.cpp':>14s}  ratio  ids equal")
    for name in args.vocab or ["llama-bpe", "qwen2", "llama-spm", "gemma-4"]:
        path = args.vocab_dir / f"ggml-vocab-{name}.gguf"
        tok = pgo.text.GGUFTokenizer.from_file(path)
        llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        data = text.encode()
        ours_t, ours = best(lambda: tok.encode(text, add_special=False), args.repeats)
        theirs_t, theirs = best(lambda: llm.tokenize(data, add_bos=False, special=False), args.repeats)
        llm.close()
        n = len(theirs)  # type: ignore[arg-type]
        print(f"{name:12s} {tok.model:7s} {n:10d} {n / ours_t:10.0f} t/s {n / theirs_t:10.0f} t/s  {theirs_t / ours_t:5.2f}x"
              f"  {ours.tolist() == theirs}")  # type: ignore[union-attr]


if __name__ == "__main__":
    main()
