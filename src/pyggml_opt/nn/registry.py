"""Classes that serialise by name, as Keras's registry of serialisables: every layer and model type
registers here, and a configuration ``{"class": name, "config": {...}}`` rebuilds any of them
(``deserialize``) without per-type code in the file format."""
from __future__ import annotations

_CLASSES: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: make ``cls`` (with ``get_config`` / ``from_config``) loadable by its name."""
    name = cls.__name__
    if _CLASSES.get(name, cls) is not cls:
        raise ValueError(f"another class is already registered as {name!r}")
    _CLASSES[name] = cls
    return cls


def serialize(obj) -> dict:
    """``obj``'s class name and configuration, JSON-ready."""
    return {"class": type(obj).__name__, "config": obj.get_config()}


def deserialize(spec, base: type = object):
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
