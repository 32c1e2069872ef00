"""Classes that serialise by name, as Keras's registry of serialisables: every layer and model type
registers here, and a configuration ``{"class": name, "config": {...}}`` rebuilds any of them
(``deserialize``) without per-type code in the file format."""
from __future__ import annotations

from typing import Any, Protocol, TypeVar, overload

_C = TypeVar("_C", bound=type)
_T = TypeVar("_T")

# type[Any]: each class has its own from_config, which the registry calls by name
_CLASSES: dict[str, type[Any]] = {}


class Configurable(Protocol):
    """What ``serialize`` reads: a registered class's constructor arguments."""

    def get_config(self) -> dict: ...


def register(cls: _C) -> _C:
    """Class decorator: make ``cls`` (with ``get_config`` / ``from_config``) loadable by its name."""
    name = cls.__name__
    if _CLASSES.get(name, cls) is not cls:
        raise ValueError(f"another class is already registered as {name!r}")
    _CLASSES[name] = cls
    return cls


def serialize(obj: Configurable) -> dict:
    """``obj``'s class name and configuration, JSON-ready."""
    return {"class": type(obj).__name__, "config": obj.get_config()}


@overload
def deserialize(spec: object) -> Any: ...
@overload
def deserialize(spec: object, base: type[_T]) -> _T: ...
def deserialize(spec: object, base: type[Any] = object) -> Any:
    """The object described by ``serialize``'s output; ValueError when it names no registered
    subclass of ``base`` or does not fit its constructor."""
    if not isinstance(spec, dict) or not isinstance(spec.get("class"), str) or not isinstance(spec.get("config"), dict):
        raise ValueError(f"not a serialised object: {spec!r:.200}")
    cls = _CLASSES.get(spec["class"])
    if cls is None or not issubclass(cls, base):
        raise ValueError(f"unknown {base.__name__} class {spec['class']!r}; registered: "
                         f"{sorted(n for n, c in _CLASSES.items() if issubclass(c, base))}")
    try:
        return cls.from_config(spec["config"])
    except TypeError as exc:
        raise ValueError(f"configuration does not fit {spec['class']}: {exc}") from None
