"""``generate``: sampling token ids from a causal language model, one token per forward pass.

The model's graph is built once, for the prompts' batch and the model's whole context, as a static
forward-only ggml-opt graph (``forward_cache``: the session keeps it, as predict's graphs, for the next
call with as many prompts), and evaluated once per new token: the window of the last ``context``
tokens is written left-aligned into the input, the rest padded with id 0. Causal attention keeps the
padding (after the last token) from changing the logits read at the last token."""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_int, check_number
from ..nn import Network
from .session import Session, exclusive_use, session_for
from .trainable import Trainable, check_trainable


def _check_language_model(model: Network) -> tuple[int, int]:
    """(context, vocab) of a built model mapping int ids (T,) to logits (T, vocab)."""
    model.require_built()
    assert model.input_shape is not None and model.output_shape is not None  # built
    if (model.input_dtype != "int32" or len(model.input_shape) != 1 or len(model.output_shape) != 2
            or model.output_shape[0] != model.input_shape[0]):
        raise ValueError("generate needs a language model: token ids (T,) in, logits (T, vocab) out (e.g. "
                         f"pyggml_opt.models.gpt); this model maps {model.input_dtype} {model.input_shape} to "
                         f"{model.output_shape}")
    return model.input_shape[0], model.output_shape[1]


def sample(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> np.ndarray:
    """One id per row of ``logits`` (n, vocab): the largest for ``temperature`` 0, else drawn from
    softmax(logits / temperature) restricted to the ``top_k`` largest (all if None), in float64."""
    if temperature == 0:
        return np.argmax(logits, axis=1)
    z = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < z.shape[1]:
        kth = np.partition(z, -top_k, axis=1)[:, -top_k][:, None]
        z = np.where(z >= kth, z, -np.inf)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    cdf = np.cumsum(p, axis=1)
    u = rng.random(z.shape[0]) * cdf[:, -1]
    return np.minimum((cdf <= u[:, None]).sum(axis=1), z.shape[1] - 1)


def generate(model: Trainable, prompt_ids: ArrayLike, max_new_tokens: int, *, temperature: float = 1.0,
             top_k: int | None = None, seed: int | None = None, backend: str | None = None,
             n_threads: int | None = None) -> np.ndarray:
    """The prompt followed by ``max_new_tokens`` ids sampled one at a time from a causal language model
    (ids (T,) -> logits (T, vocab), such as ``pyggml_opt.models.gpt``).

    prompt_ids: one prompt (L,) or a batch of prompts of one length (n, L), L >= 1; a prompt longer than
       the model's context is conditioned on its last ``context`` ids (as is every later step).
    temperature: divides the logits before the softmax; 0 picks the most likely id (greedy).
    top_k: sample among the k most likely ids only. seed: the generator's seed (None: fresh entropy);
       the same model, prompt and seed give the same ids.
    Returns int32 ids of shape (L + max_new_tokens,) or (n, L + max_new_tokens).
    """
    check_trainable(model)
    context, vocab = _check_language_model(model)
    ids = np.asarray(prompt_ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"prompt_ids must be integer token ids, got dtype {ids.dtype}")
    single = ids.ndim == 1
    ids = ids[None, :] if single else ids
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
        raise ValueError(f"prompt_ids must be (L,) or (n, L) with n, L >= 1, got shape {np.shape(prompt_ids)}")
    model.check_input(ids)
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 0)
    temperature = check_number("temperature", temperature, 0.0, float("inf"))
    if top_k is not None:
        top_k = check_int("top_k", top_k, 1, vocab)
    rng = np.random.default_rng(seed)
    out = np.zeros((ids.shape[0], ids.shape[1] + max_new_tokens), np.int32)
    out[:, :ids.shape[1]] = ids
    if max_new_tokens:
        draw = functools.partial(sample, temperature=temperature, top_k=top_k, rng=rng)
        with exclusive_use(model):
            _sample_into(model, session_for(model, backend, n_threads), out, ids.shape[1], context, draw)
    return out[0] if single else out


def _sample_into(model: Trainable, s: Session, out: np.ndarray, start: int, context: int,
                 draw: Callable[[np.ndarray], np.ndarray]) -> None:
    """Fill ``out[:, start:]`` with ids ``draw`` samples from the logits of the last step, each
    conditioned on the ids before it (at most ``context``), running on session ``s``."""
    store = model.params_on(s.scheduler.main)
    window = np.zeros((out.shape[0], context), np.int32)
    for t in range(start, out.shape[1]):
        steps = min(t, context)
        window[:, :steps] = out[:, t - steps:t]
        window[:, steps:] = 0
        # fetched per step: an interrupted evaluation closes its graph, and the cache builds another
        logits = s.forwards.run(model, store, window)
        out[:, t] = draw(logits[:, steps - 1, :])
