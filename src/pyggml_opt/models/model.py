"""The models users build and train: ``Model`` gives a network the training API (fit, evaluate,
predict, save); ``Sequential`` and ``FunctionModel`` are nn's ``SequentialNetwork`` and
``FunctionNetwork`` with it (their class names are what saved configurations name)."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar, cast

from .. import nn
from ..nn import register
from ..nn.lora import enable_lora, merge_lora
from ..saving import save
from ..saving.adapter import load_adapter, save_adapter
from ..training import evaluate, fit, generate, predict
from ..training.trainable import Trainable

_F = TypeVar("_F", bound=Callable[..., Any])


def _method(fn: _F, example: str) -> _F:
    """``fn(model, ...)`` as a method, with ``fn``'s signature (``self`` in place of the model, no
    annotation: help() shows ``fit(self, x, y=None, ...)``), its docstring about "this model", and
    ``example`` appended to it."""
    @functools.wraps(fn)
    def method(self: Model, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    # Functions take any attribute; typeshed's type of functools.wraps' result does not list this one.
    method.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[params[0].replace(name="self", annotation=inspect.Parameter.empty), *params[1:]])
    doc = inspect.cleandoc(fn.__doc__ or "").replace("``model``", "this model")
    method.__doc__ = f"{doc}\n\nExample::\n\n    {example}\n"
    return cast(_F, method)  # the same signature as fn's, self in place of the model


class Model(Trainable):
    """A network with the training API and training's state (``training.trainable``): ``fit``, ``evaluate``, ``predict``, ``generate`` (language
    models; ``pyggml_opt.training``), ``save`` (``pyggml_opt.saving``) and ``enable_lora`` (``nn.lora``). ``with model:`` frees its ggml
    memory at the end."""

    fit = _method(fit, 'history = model.fit(x_train, y_train, epochs=5, batch_size=32, validation_split=0.1)')
    evaluate = _method(evaluate, "loss, accuracy = model.evaluate(x_test, y_test)")
    predict = _method(predict, "probabilities = model.predict(x_test)   # (n, n_out)")
    generate = _method(generate, 'ids = gpt.generate(tokenizer.encode("The "), 200, temperature=0.8, top_k=20, seed=0)')
    save = _method(save, 'model.save("model.gguf"); same = pgo.load("model.gguf")')
    enable_lora = _method(enable_lora, 'model.enable_lora(rank=8, alpha=16, targets="all-linear"); model.fit(x, y)')
    save_adapter = _method(save_adapter, 'model.save_adapter("adapter.gguf")   # llama-cli -m base.gguf --lora adapter.gguf')
    load_adapter = _method(load_adapter, 'base.load_adapter("adapter.gguf")')
    merge_lora = _method(merge_lora, 'model.merge_lora(); model.save("merged.gguf", tokenizer=tok, quantize="q8_0")')


@register
class Sequential(Model, nn.SequentialNetwork):
    __doc__ = nn.SequentialNetwork.__doc__


@register
class FunctionModel(Model, nn.FunctionNetwork):
    __doc__ = nn.FunctionNetwork.__doc__
