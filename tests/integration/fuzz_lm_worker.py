"""Child process for tests/integration/test_fuzz_language_models.py (``support.children.serve``): builds a
language model from a case's builder arguments and generates from it with the case's arguments, each
given as Python source (so that a case can hold NaN, bytes, numpy values ...). What generate returns
must be what its docstring promises; a stream must give the ids the call without it gives."""
import logging

import numpy as np

logging.disable(logging.CRITICAL)
import pyggml_opt as pgo  # noqa: E402
from support.children import serve  # noqa: E402

TOKENIZER = pgo.data.CharTokenizer("abcdefghij")  # vocabulary 12
MODELS: dict = {}  # the same builder arguments: the same model (building is most of a case's time)


def _value(source: str):
    return eval(source, {"np": np, "pgo": pgo, "tok": TOKENIZER, "nan": float("nan"), "inf": float("inf")})  # noqa: S307


def run(case: dict):
    key = repr(sorted(case["model"].items()))
    if key not in MODELS:
        builder = pgo.models.llama if case["builder"] == "llama" else pgo.models.gpt
        MODELS[key] = builder(**{k: _value(v) for k, v in case["model"].items()})
    model = MODELS[key]
    args = {k: _value(v) for k, v in case["generate"].items()}
    prompt = args.pop("prompt")
    out = model.generate(prompt, **args)
    vocab = model.output_shape[-1]
    ids = np.asarray(TOKENIZER.encode(prompt) if isinstance(prompt, str) else prompt)
    n_new = out.shape[-1] - ids.shape[-1]
    if out.dtype != np.int32 or out.shape[:-1] != ids.shape[:-1] or not 0 <= n_new <= args["max_new_tokens"] \
            or not np.array_equal(out[..., :ids.shape[-1]], ids) or out.min() < 0 or out.max() >= vocab:
        raise AssertionError(f"generate returned {out!r} for a prompt {ids.shape} of vocabulary {vocab}")
    if args.get("seed") is not None and args.get("tokenizer") is None:  # the stream gives the same ids
        streamed = np.asarray(list(model.generate(prompt, **{**args, "stream": True})), np.int32)
        if not np.array_equal(streamed.T.reshape(out[..., ids.shape[-1]:].shape), out[..., ids.shape[-1]:]):
            raise AssertionError(f"the stream gave {streamed}, generate {out[..., ids.shape[-1]:]}")
    return "generated"


if __name__ == "__main__":
    serve(run)
