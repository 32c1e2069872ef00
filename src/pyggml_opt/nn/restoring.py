"""Copies and pickles of networks: what they keep (``Copyable``, which ``Network`` mixes in: the
class, configuration, input shape, weights, backend and ``_copied_state``), rebuilding a network from
that (``restore_network``, the function pickles name), and the check that a configuration gives back
the network it came from (``check_rebuilds``), run before anything is saved or pickled."""
from __future__ import annotations

import copy
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar, cast

import numpy as np

from ..core.tensor_data import Weight


class Rebuildable(Protocol):
    """What copying and rebuilding use of a network (``nn.network.Network`` has all of it)."""

    input_shape: tuple[int, ...] | None
    param_shapes: dict[str, tuple[int, ...]]
    backend: str | None

    @classmethod
    def from_config(cls, config: dict) -> Rebuildable: ...
    def get_config(self) -> dict: ...
    def shapes_for(self, input_shape: Sequence[int]) -> dict[str, tuple[int, ...]]: ...
    def build_with_weights(self, input_shape: Sequence[int], weights: Mapping[str, Weight]) -> Any: ...
    def legacy_names(self) -> dict[str, str]: ...
    def get_weights(self) -> dict[str, Weight]: ...
    def _copied_state(self) -> dict[str, Any]: ...
    def _restore_copied_state(self, state: dict[str, Any]) -> None: ...


_R = TypeVar("_R", bound=Rebuildable)


def copied(network: _R) -> _R:
    """An independent copy of ``network``: what a pickle of it keeps, rebuilt."""
    rebuild, args = reduced(network)
    return cast(_R, rebuild(*args[:-1], copy.deepcopy(args[-1])))  # the copied state may be mutable


def reduced(network: Rebuildable) -> tuple[Callable[..., Rebuildable], tuple[Any, ...]]:
    """What pickle (and copies) keep of ``network``: the architecture, the weights in numpy, the backend,
    the state of the subclass (``__reduce__``'s answer). Checked here, not only when loaded: a pickle
    that cannot be loaded again is a model lost."""
    config = network.get_config()
    weights = None
    if network.input_shape is not None:  # built
        check_rebuilds(type(network), config, network.input_shape, network.param_shapes)
        weights = network.get_weights()
    return restore_network, (type(network), config, network.input_shape, weights, network.backend,
                             network._copied_state())


class Copyable:
    """``clone``, ``copy.copy``, ``copy.deepcopy`` and pickle for a network: independent copies with the
    same architecture, weights and what ``_copied_state`` keeps (``Network`` defines it; a subclass adds
    to it), no native state shared."""

    def clone(self: _R) -> _R:
        """An independent copy: same architecture, weights and what ``_copied_state`` keeps; no native
        state shared."""
        return copied(self)

    def __reduce__(self: Rebuildable) -> tuple[Callable[..., Rebuildable], tuple[Any, ...]]:
        return reduced(self)

    def __copy__(self: _R) -> _R:
        return copied(self)

    def __deepcopy__(self: _R, memo: dict[int, object]) -> _R:
        return copied(self)


def restore_network(cls: type[_R], config: dict, input_shape: Sequence[int] | None,
                    weights: Mapping[str, Weight] | None, backend: str | None, state: dict[str, Any]) -> _R:
    """A network of class ``cls`` from what ``reduced`` keeps."""
    network = cast(_R, cls.from_config(config))
    if input_shape is not None:
        if isinstance(weights, Mapping):
            renamed = {old: new for new, old in network.legacy_names().items()}
            weights = {renamed.get(name, name): value for name, value in weights.items()}
        network.build_with_weights(input_shape, weights)  # type: ignore[arg-type]  # checked there
    network.backend = backend
    network._restore_copied_state(state)
    return network


def restore(cls: type[_R], config: dict, input_shape: Sequence[int] | None, weights: dict[str, np.ndarray] | None,
            loss: object, backend: str | None, history: object, optimizer_state: object = None) -> _R:
    """What pickles of pyggml_opt 0.1's first releases call (their state: the loss, training's history
    and optimizer state, which this layer passes on unread): users' pickled models still load."""
    return restore_network(cls, config, input_shape, weights, backend,
                           {"loss": loss, "history": history, "optimizer_state": optimizer_state})


CONFIG_HINT = (": does every layer's get_config() return all of its constructor's arguments (a custom layer "
                "that does not override it is rebuilt with its default sizes)?")


def check_rebuilds(cls: type[Rebuildable], config: dict, input_shape: tuple[int, ...],
                   param_shapes: dict[str, tuple[int, ...]]) -> None:
    """ValueError unless ``cls.from_config(config)`` built for ``input_shape`` has exactly the parameters
    ``param_shapes``: the test that a saved or pickled architecture gives back the model it came from
    (no weights are made: shapes only)."""
    try:
        shapes = cls.from_config(config).shapes_for(input_shape)
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"the {cls.__name__} cannot be rebuilt from its configuration ({exc}){CONFIG_HINT}") from None
    if shapes != param_shapes:
        differ = sorted(n for n in shapes.keys() | param_shapes.keys() if shapes.get(n) != param_shapes.get(n))
        first = differ[0]
        raise ValueError(f"the {cls.__name__} rebuilt from its configuration differs from this one in "
                         f"{len(differ)} parameter(s), first {first!r}: {shapes.get(first)} there, "
                         f"{param_shapes.get(first)} here{CONFIG_HINT}")
