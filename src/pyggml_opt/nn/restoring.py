"""Rebuilding a network from what its pickles and files keep: its class, configuration, input shape and
weights (``restore_network``, which ``Network.__reduce__`` names), and the check that a configuration
gives back the network it came from (``check_rebuilds``), run before anything is saved."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..core.tensor_data import Weight

if TYPE_CHECKING:  # network.py imports this module
    from .network import Network


def restore_network(cls: type[Network], config: dict, input_shape: Sequence[int] | None,
                    weights: Mapping[str, Weight] | None, backend: str | None, state: dict[str, Any]) -> Network:
    """A network of class ``cls`` from what ``Network.__reduce__`` keeps."""
    network = cls.from_config(config)
    if input_shape is not None:
        if isinstance(weights, Mapping):
            renamed = {old: new for new, old in network.legacy_names().items()}
            weights = {renamed.get(name, name): value for name, value in weights.items()}
        network.build_with_weights(input_shape, weights)  # type: ignore[arg-type]  # checked there
    network.backend = backend
    network._restore_copied_state(state)
    return network


def restore(cls: type[Network], config: dict, input_shape: Sequence[int] | None, weights: dict[str, np.ndarray] | None,
            loss: object, backend: str | None, history: object, optimizer_state: object = None) -> Network:
    """What pickles of pyggml_opt 0.1's first releases call (their state: the loss, training's history
    and optimizer state, which this layer passes on unread): users' pickled models still load."""
    return restore_network(cls, config, input_shape, weights, backend,
                           {"loss": loss, "history": history, "optimizer_state": optimizer_state})


CONFIG_HINT = (": does every layer's get_config() return all of its constructor's arguments (a custom layer "
                "that does not override it is rebuilt with its default sizes)?")


def check_rebuilds(cls: type[Network], config: dict, input_shape: tuple[int, ...],
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
