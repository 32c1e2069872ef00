"""The models users build and train: ``Model`` gives a network the training API (fit, evaluate,
predict, save); ``Sequential`` and ``FunctionModel`` are nn's networks with it."""
from __future__ import annotations

import functools
import inspect
from typing import Callable

from .. import nn
from ..nn import Network, register
from ..saving import save
from ..training import evaluate, fit, predict


def _method(fn: Callable) -> Callable:
    """``fn(model, ...)`` as a method, with ``fn``'s signature and docstring (for help())."""
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    method.__signature__ = sig.replace(parameters=[params[0].replace(name="self"), *params[1:]])
    return method


class Model(Network):
    """A network with the training API: ``fit``, ``evaluate``, ``predict`` (``pyggml_opt.training``)
    and ``save`` (``pyggml_opt.saving``). ``with model:`` frees its ggml memory at the end."""

    fit = _method(fit)
    evaluate = _method(evaluate)
    predict = _method(predict)
    save = _method(save)


@register
class Sequential(Model, nn.Sequential):
    __doc__ = nn.Sequential.__doc__


@register
class FunctionModel(Model, nn.FunctionModel):
    __doc__ = nn.FunctionModel.__doc__
