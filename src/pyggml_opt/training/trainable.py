"""``Trainable``: a network with what training leaves on it, the base of the user's models
(``models.Model``). nn's ``Network`` knows nothing of training (its ``loss`` says what its outputs
are for: fit sets it, files record it); this class adds, for fit, predict, evaluate and generate:

  - ``history``: the ``History`` of the last fit; ``optimizer_state``: the ``OptimizerState`` it ended
    with (``fit(optimizer_state=...)`` continues from it); both kept by copies and pickles;
  - ``stop_training``: set by a callback to end fit after the current batch;
  - ``busy``: what pins the parameter buffer (a running fit), so that a callback cannot free or
    rebuild it;
  - ``session``: the ``training.session.Session`` its calls run on (scheduler, inference context,
    cached forward graphs), freed by ``close()`` with the parameters.
"""
from __future__ import annotations

from typing import Any, Protocol

from ..core import OptimizerState
from ..core.tensor_data import GRADIENT_TYPES
from ..nn import Network
from .history import History


class Closeable(Protocol):
    """What a model keeps as its session: freed by ``close``."""

    device: str

    def close(self) -> None: ...


class Trainable(Network):
    """A network with training's state (see the module); ``models.Model`` adds the methods."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # before Network.__init__: a subclass may build there, and building asks check_not_busy
        self.history: History | None = None
        self.optimizer_state: OptimizerState | None = None
        self.stop_training = False
        self.busy: str | None = None
        self.session: Closeable | None = None
        super().__init__(*args, **kwargs)

    def check_not_busy(self, what: str) -> None:
        """RuntimeError while something (fit, a generate stream) uses the parameter buffer: freeing or
        replacing it from the thread that holds the model (a fit callback, the code between a stream's
        tokens) would crash."""
        if self.busy is not None:
            raise RuntimeError(f"cannot {what} the model while {self.busy}")

    def close(self) -> None:
        """Free the ggml memory of the weights and of the session (the weights stay available in numpy;
        using the model again re-creates what it needs). Idempotent. Waits for calls of other threads
        that use the model (fit included) to end."""
        with self.lock:
            self.check_not_busy("close")
            if self.session is not None:
                session, self.session = self.session, None
                session.close()
            super().close()

    def _copied_state(self) -> dict[str, Any]:
        return {**super()._copied_state(), "history": self.history, "optimizer_state": self.optimizer_state}

    def _restore_copied_state(self, state: dict[str, Any]) -> None:
        self.history, self.optimizer_state = state.get("history"), state.get("optimizer_state")
        super()._restore_copied_state({k: v for k, v in state.items() if k not in ("history", "optimizer_state")})


def check_quantized_on_cpu(model: Trainable, device: str) -> None:
    """ValueError naming the parameters ``model`` keeps quantized, if any, unless ``device`` is the CPU:
    quantized parameters stay frozen, and the gradient that reaches the layers below them (LoRA on a
    quantized base) is ggml's OUT_PROD of the quantized matrix, which only ggml's CPU backend computes."""
    quantized = model.quantized()
    blocked = sorted({t for t in quantized.values() if t not in GRADIENT_TYPES})
    if blocked:
        names = sorted(n for n, t in quantized.items() if t in blocked)
        raise ValueError(f"fit cannot pass gradients through {', '.join(blocked)} weights ({', '.join(names[:4])}"
                         f"{' ...' if len(names) > 4 else ''}): ggml's CPU backend has no OUT_PROD for them; give "
                         "them float32 values with set_weights (or load a file of another type)")
    if quantized and device.upper() != "CPU":
        names = sorted(quantized)
        raise ValueError(f"this model keeps {len(names)} parameters quantized and frozen ({', '.join(names[:4])}"
                         f"{' ...' if len(names) > 4 else ''}: {', '.join(sorted(set(quantized.values())))}); fit "
                         f"trains around them on the CPU only (the gradient through a quantized matrix is ggml's "
                         f"CPU OUT_PROD), not on {device}: fit(..., backend='cpu'), or give them float32 values "
                         "with set_weights")


def check_has_trainable(model: Trainable) -> None:
    """ValueError when every parameter of ``model`` is frozen (or it has none): a fit would change nothing."""
    if not model.param_shapes.keys() - model.buffer_names() - model.frozen():
        raise ValueError("this model has no trainable parameters (every one is frozen: model.unfreeze(...) trains "
                         "them again); fit would change nothing")


def check_trainable(obj: object) -> Trainable:
    """TypeError unless ``obj`` is a model fit can train (a ``pgo.Sequential``, ``pgo.FunctionModel`` ...)."""
    if not isinstance(obj, Trainable):
        raise TypeError(f"model must be a pyggml_opt model, got {type(obj).__name__}")
    return obj
