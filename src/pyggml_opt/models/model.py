"""The models users build and train: ``Model`` gives a network the training API (fit, evaluate,
predict, save); ``Sequential`` and ``FunctionModel`` are nn's networks with it."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar, cast

from .. import nn
from ..nn import Network, register
from ..saving import save
from ..training import evaluate, fit, generate, predict

_F = TypeVar("_F", bound=Callable[..., Any])


def _method(fn: _F) -> _F:
    """``fn(model, ...)`` as a method, with ``fn``'s signature and docstring (for help())."""
    @functools.wraps(fn)
    def method(self: Model, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    # Functions take any attribute; typeshed's type of functools.wraps' result does not list this one.
    method.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[params[0].replace(name="self"), *params[1:]])
    return cast(_F, method)  # the same signature as fn's, self in place of the model


class Model(Network):
    """A network with the training API: ``fit``, ``evaluate``, ``predict``, ``generate`` (language
    models; ``pyggml_opt.training``) and ``save`` (``pyggml_opt.saving``). ``with model:`` frees its ggml
    memory at the end."""

    fit = _method(fit)
    evaluate = _method(evaluate)
    predict = _method(predict)
    generate = _method(generate)
    save = _method(save)


@register
class Sequential(Model, nn.Sequential):
    __doc__ = nn.Sequential.__doc__


@register
class FunctionModel(Model, nn.FunctionModel):
    __doc__ = nn.FunctionModel.__doc__
