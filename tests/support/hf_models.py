"""Test models made as users' GGUF files are made: a ``transformers`` model of a real architecture with
random weights (``save_pretrained``) and a real tokenizer, converted by llama.cpp's own
``convert_hf_to_gguf.py`` and quantized by llama.cpp (``llama_cpp.llama_model_quantize``).

llama.cpp's source comes from the llama-cpp-python sdist (the version the test extra builds), fetched
once into a cache folder (``PYGGML_OPT_CACHE``, default ``~/.cache/pyggml_opt``) and never committed;
its ``models/ggml-vocab-*.gguf`` give the real tokenizers (``transformers`` reads a GGUF vocabulary), which
the converter recognises by its pre-tokenizer's hash as it does the models' own tokenizer files.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

LLAMA_CPP_PYTHON = "0.3.36"  # the test extra's llama-cpp-python: its sdist holds llama.cpp's source


def _fail_or_skip(msg: str) -> None:
    if os.environ.get("PYGGML_OPT_REQUIRE_C_TESTS") == "1":
        pytest.fail(msg + " (PYGGML_OPT_REQUIRE_C_TESTS=1)")
    pytest.skip(msg)


def cache_dir() -> Path:
    path = Path(os.environ.get("PYGGML_OPT_CACHE", Path.home() / ".cache" / "pyggml_opt"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def llama_cpp_source() -> Path:
    """llama.cpp's source tree inside the llama-cpp-python sdist, downloaded (pip) and unpacked once."""
    root = cache_dir() / f"llama_cpp_python-{LLAMA_CPP_PYTHON}"
    source = root / "vendor" / "llama.cpp"
    if (source / "convert_hf_to_gguf.py").is_file():
        return source
    download = cache_dir() / "sdist"
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                           f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", str(download)], capture_output=True, text=True)
    archive = download / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
    if done.returncode != 0 or not archive.is_file():
        _fail_or_skip(f"the llama-cpp-python {LLAMA_CPP_PYTHON} sdist could not be fetched: {done.stderr[-400:]}")
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 (and the 3.8-3.10 security releases)
            tar.extractall(cache_dir(), filter="data")
        else:
            tar.extractall(cache_dir())
    return source


def vocab_keys(vocab: str) -> dict:
    """The ``tokenizer.*`` keys of llama.cpp's ``models/ggml-vocab-<vocab>.gguf`` (a real vocabulary, its
    special tokens and, for some, a chat template), as a model's ``file_keys`` holds them."""
    from pyggml_opt.core import GGUFFile

    with GGUFFile.read(llama_cpp_source() / "models" / f"ggml-vocab-{vocab}.gguf") as f:
        return {k: f.get_typed(k) for k in f.keys() if k.startswith("tokenizer.")}


SPM_FORTUNES = "fortunes-spm"  # not a llama.cpp vocabulary: a SentencePiece model trained on Debian's fortunes


def tokenizer_dir(vocab: str) -> Path:
    """A folder with the ``transformers`` tokenizer files (tokenizer.json, tokenizer_config.json, chat
    template) of llama.cpp's ``models/ggml-vocab-<vocab>.gguf``, made once; for ``SPM_FORTUNES`` a
    SentencePiece ``tokenizer.model`` instead (``fortunes_sentencepiece``)."""
    out = cache_dir() / "tokenizers" / vocab
    if vocab == SPM_FORTUNES:
        return fortunes_sentencepiece(out)
    if (out / "tokenizer.json").is_file():
        return out
    from transformers import AutoTokenizer

    import gguf

    name = f"ggml-vocab-{vocab}.gguf"
    tok = AutoTokenizer.from_pretrained(llama_cpp_source() / "models", gguf_file=name)
    partial = out.with_name(vocab + ".partial")
    tok.save_pretrained(partial)
    n_tokens = len(gguf.GGUFReader(llama_cpp_source() / "models" / name).fields["tokenizer.ggml.tokens"].data)
    _drop_tokens_from(partial, n_tokens)
    partial.replace(out)
    return out


def fortunes_sentencepiece(out: Path, vocab_size: int = 1024) -> Path:
    """A folder holding ``tokenizer.model``: a SentencePiece BPE model with byte fallback (Gemma's kind;
    ids 0-3 pad, eos, bos, unk as Gemma's) of ``vocab_size`` pieces trained on Debian's fortunes, made
    once. llama.cpp's converter reads it as it reads Gemma's own."""
    if (out / "tokenizer.model").is_file():
        return out
    import sentencepiece

    import pyggml_opt as pgo

    texts, _, _ = pgo.data.load_fortunes()
    partial = out.with_name(out.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_prefix=str(partial / "tokenizer"), vocab_size=vocab_size,
        model_type="bpe", byte_fallback=True, character_coverage=1.0, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
        num_threads=2, minloglevel=2)
    (partial / "tokenizer.vocab").unlink()
    partial.replace(out)
    return out


def _drop_tokens_from(folder: Path, n_tokens: int) -> None:
    """Remove the tokens of id ``n_tokens`` and above that transformers' GGUF reader adds (an
    "<|endoftext|>" padding token after Llama 3's 128,256), so that the vocabulary is the file's."""
    path = folder / "tokenizer.json"
    spec = json.loads(path.read_text())
    extra = {t["content"] for t in spec["added_tokens"] if t["id"] >= n_tokens}
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["id"] < n_tokens]
    spec["model"]["vocab"] = {k: v for k, v in spec["model"]["vocab"].items() if v < n_tokens}
    path.write_text(json.dumps(spec, ensure_ascii=False))
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["added_tokens_decoder"] = {k: v for k, v in config.get("added_tokens_decoder", {}).items()
                                      if int(k) < n_tokens}
    for key in [k for k, v in config.items() if k.endswith("_token") and v in extra]:
        del config[key]
    config_path.write_text(json.dumps(config, ensure_ascii=False))


def save_hf_model(config, vocab: str, out: Path, seed: int = 0) -> Path:
    """A ``transformers`` causal LM of ``config`` (random weights drawn with ``seed``) and the tokenizer
    of ``vocab``, saved to ``out`` as a model folder on the Hugging Face Hub is."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out)
    for f in tokenizer_dir(vocab).iterdir():
        shutil.copy(f, out / f.name)
    return out


def convert(hf_dir: Path, out: Path, outtype: str = "f32") -> Path:
    """llama.cpp's ``convert_hf_to_gguf.py`` run on ``hf_dir`` (its own gguf-py beside it)."""
    source = llama_cpp_source()
    env = {**os.environ, "PYTHONPATH": str(source / "gguf-py"), "NO_LOCAL_GGUF": ""}
    done = subprocess.run([sys.executable, str(source / "convert_hf_to_gguf.py"), str(hf_dir), "--outfile", str(out),
                           "--outtype", outtype], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def quantize(src: Path, out: Path, ftype: str) -> Path:
    """``src`` quantized by llama.cpp to ``ftype`` (llama.h's LLAMA_FTYPE_MOSTLY_<ftype>: "Q8_0",
    "Q4_K_M", "F16", ...)."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
    params.nthread = 2
    assert llama_cpp.llama_model_quantize(str(src).encode(), str(out).encode(), params) == 0
    return out
