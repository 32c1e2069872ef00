"""``generate``: sampling token ids from a causal language model, one token at a time.

A model whose layers all decode (``nn.decoding``: gpt, llama) runs with a key / value cache: the
prompt (its last ``context`` ids) as one graph that fills the cache, then each new token as a graph of
one step attending over the cached rows, so a token costs about the same at every position (a
one-step graph per block of ``nn.decoding.KV_BLOCK`` cached rows, built when the cache reaches the
block and closed when it leaves it; a long prompt in chunks of ``nn.decoding.PROMPT_CHUNK`` steps). Once the cache holds ``context`` steps, each further token recomputes its window of the
last ``context`` ids (learned positions cannot slide). Another model recomputes its window for every
token on a static forward graph (``forward_cache``: the session keeps it, as predict's graphs): the
window is written left-aligned into the input, the rest padded with id 0, and causal attention keeps
the padding from changing the logits read at the last token. ``stream=True`` yields the tokens (or
their text) as they come."""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterator

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_bool, check_int, check_number
from ..core import Scheduler
from ..nn import Network, ParamStore
from ..nn.decoding import PROMPT_CHUNK, DecodeGraph, KVCache, decoding_layers, kv_rows
from ..text.llama_special import eog_ids
from .arguments import check_seed
from .session import Session, exclusive_use, session_for
from .trainable import Trainable, check_trainable

Draw = Callable[[np.ndarray], np.ndarray]


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


def sample(logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator,
           top_p: float = 1.0) -> np.ndarray:
    """One id per row of ``logits`` (n, vocab): the largest for ``temperature`` 0, else drawn from
    softmax(logits / temperature) restricted to the ``top_k`` largest (all if None) and then to the
    fewest most likely ids whose probabilities sum to at least ``top_p`` (nucleus sampling; 1: all), in
    float64."""
    if temperature == 0:
        return np.argmax(logits, axis=1)
    z = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < z.shape[1]:
        kth = np.partition(z, -top_k, axis=1)[:, -top_k][:, None]
        z = np.where(z >= kth, z, -np.inf)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    if top_p < 1.0:
        order = np.argsort(-p, axis=1, kind="stable")
        ranked = np.take_along_axis(p, order, axis=1)
        before = np.cumsum(ranked, axis=1) - ranked  # mass of the more likely ids
        keep = before < top_p * ranked.sum(axis=1, keepdims=True)
        np.put_along_axis(ranked, order, np.where(keep, ranked, 0.0), axis=1)  # back to id order
        p = ranked
    cdf = np.cumsum(p, axis=1)
    u = rng.random(z.shape[0]) * cdf[:, -1]
    return np.minimum((cdf <= u[:, None]).sum(axis=1), z.shape[1] - 1)


def generate(model: Trainable, prompt_ids: ArrayLike | str, max_new_tokens: int, *, temperature: float = 1.0,
             top_k: int | None = None, top_p: float = 1.0, seed: int | None = None, stop: Any = (),
             tokenizer: Any = None, stream: bool = False, backend: str | None = None,
             n_threads: int | None = None, ignore_eos: bool = False) -> Any:
    """The prompt followed by up to ``max_new_tokens`` ids sampled one at a time from a causal language
    model (ids (T,) -> logits (T, vocab), such as ``pyggml_opt.models.gpt`` or ``llama``).

    prompt_ids: one prompt (L,) or a batch of prompts of one length (n, L), L >= 1, ids in [0, vocab);
       a text with ``tokenizer``. A prompt longer than the model's context is conditioned on its last
       ``context`` ids (as is every later step).
    temperature: divides the logits before the softmax; 0 picks the most likely id (greedy).
    top_k: sample among the k most likely ids only. top_p: then among the fewest most likely ids whose
       probabilities sum to at least top_p, in (0, 1]. seed: the generator's seed (None: fresh entropy);
       the same model, prompt and seed give the same ids.
    stop: an id, a string (needs ``tokenizer``) or a list of them (one prompt only): generation ends
       with the token that is a stop id or completes a stop string in the new text (both kept in the ids).
       One prompt also ends at an end-of-generation token of its vocabulary (kept in the ids), as
       llama.cpp collects them (``tokenizer.eog_ids`` of a ``text.GGUFTokenizer``, else those of the
       GGUF file the model was loaded from: its end-of-text, end-of-turn ... tokens), unless
       ``ignore_eos`` (llama.cpp's --ignore-eos).
    tokenizer: what ``encode`` / ``decode`` text (``data.CharTokenizer``, ``data.BPETokenizer``).
    stream: return an iterator instead, of each new id as it comes (an int; for a batch, an int32
       array (n,)), or with ``tokenizer`` of pieces of the new text (a stop string and what follows it
       left out). Calls on the model from other threads wait until the iterator ends or is closed.
    Returns int32 ids of shape (L + new,) or (n, L + new), new = max_new_tokens unless a stop ended it.
    """
    check_trainable(model)
    context, vocab = _check_language_model(model)
    _check_tokenizer(tokenizer, vocab)
    if isinstance(prompt_ids, str):
        if tokenizer is None:
            raise TypeError("a text prompt needs tokenizer= (prompt_ids are token ids otherwise)")
        prompt_ids = tokenizer.encode(prompt_ids)
    try:
        ids = np.asarray(prompt_ids)
    except ValueError:  # numpy's words for rows of different lengths
        raise ValueError("prompt_ids must be (L,) or (n, L): the prompts of a batch must have one length") from None
    if ids.size == 0:  # [] is float64 to numpy: the emptiness is the problem
        raise ValueError(f"prompt_ids must be (L,) or (n, L) with n, L >= 1, got shape {ids.shape} (an empty prompt)")
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
    top_p = check_number("top_p", top_p, 0.0, 1.0, lo_open=True)
    stop_ids, stop_texts = _check_stop(stop, tokenizer, single, vocab)
    if single and not check_bool("ignore_eos", ignore_eos):
        stop_ids |= _end_of_generation(model, tokenizer, vocab)
    if stream and tokenizer is not None and not single:
        raise ValueError("stream with tokenizer= streams the text of one prompt; give one prompt (L,)")
    rng = np.random.default_rng(check_seed(seed))
    draw = functools.partial(sample, temperature=temperature, top_k=top_k, rng=rng, top_p=top_p)
    out = np.zeros((ids.shape[0], ids.shape[1] + max_new_tokens), np.int32)
    out[:, :ids.shape[1]] = ids
    tokens = _stopping(model, (out, ids.shape[1], context), (backend, n_threads), draw, (stop_ids, stop_texts, tokenizer))
    if stream:
        if tokenizer is not None:
            return _text_pieces(tokenizer, tokens, stop_texts, single)
        return (int(t[0]) if single else t.copy() for t, _ in tokens)
    end = ids.shape[1]
    for _, end in tokens:
        pass
    return out[0, :end] if single else out[:, :end]


def _end_of_generation(model: Trainable, tokenizer: Any, vocab: int) -> set[int]:
    """The ids that end a generation: the tokenizer's ``eog_ids``, else those of the vocabulary in the
    file the model came from (none for a model made in Python)."""
    ids = getattr(tokenizer, "eog_ids", None)
    if ids is None:
        ids = eog_ids(getattr(model, "file_keys", None) or {})
    return {int(i) for i in ids if 0 <= int(i) < vocab}


def _check_tokenizer(tokenizer: Any, vocab: int) -> None:
    """TypeError unless ``tokenizer`` (if given) encodes and decodes; ValueError unless it has the
    model's ``vocab`` ids (other ids would be sampled that it cannot decode, or encoded that the model
    cannot embed)."""
    if tokenizer is None:
        return
    if not callable(getattr(tokenizer, "encode", None)) or not callable(getattr(tokenizer, "decode", None)):
        raise TypeError(f"tokenizer must have encode and decode (data.CharTokenizer, data.BPETokenizer), got "
                        f"{type(tokenizer).__name__}")
    size = getattr(tokenizer, "vocab_size", vocab)
    if size != vocab:
        raise ValueError(f"the tokenizer has {size} ids, the model {vocab}: a model and its tokenizer must have one "
                         "vocabulary size")


def _check_stop(stop: Any, tokenizer: Any, single: bool, vocab: int) -> tuple[set[int], list[str]]:
    """The stop ids and strings of ``generate``'s ``stop`` (None: none)."""
    if stop is None:
        return set(), []
    if not isinstance(stop, (int, np.integer, str, list, tuple, set, frozenset, np.ndarray)) or isinstance(stop, bool):
        raise TypeError(f"stop must be a token id, a string or a list of them, got {type(stop).__name__}")
    items = [stop] if isinstance(stop, (int, np.integer, str)) else list(np.ravel(stop) if isinstance(stop, np.ndarray) else stop)
    ids: set[int] = set()
    texts: list[str] = []
    for item in items:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            ids.add(int(item))
        else:
            raise TypeError(f"stop must be token ids and strings, got {item!r} in {stop!r}")
    if any(not t for t in texts):
        raise ValueError("a stop string must not be empty")
    outside = sorted(i for i in ids if not 0 <= i < vocab)
    if outside:
        raise ValueError(f"stop id {outside[0]} is outside the model's vocabulary [0, {vocab})")
    if texts and tokenizer is None:
        raise ValueError("stop strings need tokenizer= (to read the new ids as text)")
    if items and not single:
        raise ValueError("stop works with one prompt only (a batch's prompts would stop at different lengths)")
    return ids, texts


def _stopping(model: Trainable, job: tuple[np.ndarray, int, int], where: tuple[str | None, int | None], draw: Draw,
              stops: tuple[set[int], list[str], Any]) -> Iterator[tuple[np.ndarray, int]]:
    """(new ids, length of ``out`` so far) for each token ``_tokens`` samples into ``out`` (``job``:
    out, prompt length, context), until a stop (``stops``: ids, strings, tokenizer); the model is
    held (``exclusive_use``) while they come."""
    out, start, context = job
    stop_ids, stop_texts, tokenizer = stops
    if start == out.shape[1]:
        return
    with exclusive_use(model):
        s = session_for(model, *where)
        # between two tokens of a stream the caller's thread holds the lock: closing or rebuilding the
        # model from there would free the cache's graphs (check_not_busy refuses it); fit's reason stays
        before, model.busy = model.busy, model.busy or "a generate stream is open (close it first)"
        try:
            for t, new in enumerate(_tokens(model, s, out, (start, context), draw), start + 1):
                yield new, t
                if int(new[0]) in stop_ids or (stop_texts and any(x in tokenizer.decode(out[0, start:t]) for x in stop_texts)):
                    return
        finally:
            model.busy = before


def _tokens(model: Trainable, s: Session, out: np.ndarray, where: tuple[int, int], draw: Draw) -> Iterator[np.ndarray]:
    """Fill ``out[:, start:]`` (``where``: start, context) with ids ``draw`` samples from the logits of
    the last step, each conditioned on the ids before it (at most ``context``), running on session
    ``s``; yields each column as it is filled."""
    start, context = where
    store = model.params_on(s.scheduler.main)
    layers = decoding_layers(model)
    if layers is None:
        window = np.zeros((out.shape[0], context), np.int32)
        for t in range(start, out.shape[1]):
            steps = min(t, context)
            window[:, :steps] = out[:, t - steps:t]
            window[:, steps:] = 0
            # fetched per step: an interrupted evaluation closes its graph, and the cache builds another
            out[:, t] = draw(s.forwards.run(model, store, window)[:, steps - 1, :])
            yield out[:, t]
        return
    decoder = _CachedDecoder(model, layers, store, s, out.shape[0])
    try:
        cached = min(start, context)
        logits = decoder.logits(out[:, start - cached:start], 0)
        for t in range(start, out.shape[1]):
            if t > start and cached < context:
                logits = decoder.logits(out[:, t - 1:t], cached)
                cached += 1
            elif t > start:  # the cache is full: the window slides, recomputed as without a cache
                logits = decoder.logits(out[:, t - context:t], 0)
            out[:, t] = draw(logits)
            yield out[:, t]
    finally:
        decoder.close()


class _CachedDecoder:
    """A key / value cache for ``batch`` sequences of ``model`` and its decoding graphs (by new steps
    and cached rows), on a scheduler of its own over session ``s``'s backends (ggml-opt's contexts
    skip re-allocating the graph they allocated last on theirs)."""

    def __init__(self, model: Network, layers: list, store: ParamStore, s: Session, batch: int) -> None:
        assert model.input_shape is not None  # checked by generate
        self.model, self.layers, self.store = model, layers, store
        self.context = model.input_shape[0]
        self.graphs: dict[tuple[int, int], DecodeGraph] = {}
        self.cache = KVCache(layers, batch, self.context, store.backend)
        self.scheduler = Scheduler(s.scheduler.backends)

    def logits(self, ids: np.ndarray, start: int) -> np.ndarray:
        """The logits (batch, vocab) of the last of ``ids`` (batch, steps), the steps at positions
        ``start`` onwards after the ``start`` cached ones (whose keys and values the cache then holds); a
        long prompt in graphs of ``PROMPT_CHUNK`` steps."""
        for first in range(0, ids.shape[1], PROMPT_CHUNK):
            chunk = ids[:, first:first + PROMPT_CHUNK]
            key = (chunk.shape[1], kv_rows(start + first, chunk.shape[1], self.context))
            graph = self.graphs.get(key)
            if graph is None:
                if key[0] == 1:  # the cache only grows: a one-step graph over fewer rows will not run again
                    for done in [k for k in self.graphs if k[0] == 1]:
                        self.graphs.pop(done).close()
                graph = self.graphs[key] = DecodeGraph(self.model, self.layers, self.store, self.cache, *key, last_only=True)
            logits = graph.run(self.scheduler, chunk, start + first)
        return logits[:, -1, :]

    def close(self) -> None:
        for graph in self.graphs.values():
            graph.close()
        self.scheduler.close()
        self.cache.close()


def _text_pieces(tokenizer: Any, tokens: Iterator[tuple[np.ndarray, int]], stop_texts: list[str],
                 single: bool) -> Iterator[str]:
    """The new text as ``tokens`` come, in pieces: held back while it might end in a stop string or in a
    character whose bytes are not all there yet; the text from a stop string on left out."""
    new: list[int] = []
    sent = 0
    text = ""
    for ids, _ in tokens:
        new.append(int(ids[0]))
        text = tokenizer.decode(np.array(new, np.int32))
        hits = [text.find(x) for x in stop_texts if x in text]
        if hits:
            text = text[:min(hits)]
            break
        ready = len(text.rstrip("\ufffd"))
        for x in stop_texts:  # the text may end in the start of a stop string
            k = next((k for k in range(len(x) - 1, 0, -1) if text.endswith(x[:k])), 0)
            ready = min(ready, len(text) - k)
        if ready > sent:
            yield text[sent:ready]
            sent = ready
    if len(text) > sent:
        yield text[sent:]
