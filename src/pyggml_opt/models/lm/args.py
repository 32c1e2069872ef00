"""``ModelArgs``: what a language model is made from, as a frozen dataclass its model carries (as
mlx-lm's ``ModelArgs``). Each architecture family (``gpt.py``, ``llama.py``) subclasses it with its
own fields; the values are checked and normalised once, when the arguments are made."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from ...checks import check_bool, check_int

# longer windows are no model's: every graph is that many steps long, attention's scores the square
# (a gpt's position table of 2**40 rows was a MemoryError of 64 TiB when built; a file claiming more is corrupt)
MAX_CONTEXT = 1 << 20


def check_context(context: object) -> int:
    """A language model's window length, in [1, MAX_CONTEXT]."""
    return check_int("context", context, 1, MAX_CONTEXT)


@dataclass(frozen=True)
class ModelArgs:
    """The arguments every language model has: ids in [0, ``vocab_size``), windows of ``context`` ids,
    width ``dim``, ``n_layers`` blocks of ``n_heads`` attention heads, and whether the output layer
    uses the token embedding as its weight (``tie_embeddings``). A subclass names its ``family`` (the
    builder's name, what a model's configuration records) and checks its own fields in ``check``."""

    vocab_size: int
    context: int
    dim: int
    n_layers: int
    n_heads: int
    tie_embeddings: bool = False

    family: ClassVar[str] = ""
    families: ClassVar[dict[str, type["ModelArgs"]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        ModelArgs.families[cls.family] = cls

    def __post_init__(self) -> None:
        self._set("vocab_size", check_int("vocab_size", self.vocab_size))
        self._set("context", check_context(self.context))
        self._set("tie_embeddings", check_bool("tie_embeddings", self.tie_embeddings))
        for name in ("dim", "n_layers", "n_heads"):
            self._set(name, check_int(name, getattr(self, name)))
        self.check()

    def check(self) -> None:
        """Check and normalise the subclass's fields (``_set``); TypeError / ValueError naming the field."""

    def layers(self) -> list:
        """The layers these arguments make (the family's block recipe), names included: what a
        ``LanguageModel`` of them holds."""
        raise NotImplementedError

    def _set(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)  # the dataclass is frozen once made

    def to_config(self) -> dict[str, Any]:
        """The arguments as JSON values, with the family: what ``from_config`` takes back."""
        return {"family": self.family, **dataclasses.asdict(self)}

    @staticmethod
    def from_config(config: object) -> "ModelArgs":
        """The arguments of ``to_config``'s dict (ValueError for an unknown family or bad fields)."""
        if not isinstance(config, dict) or config.get("family") not in ModelArgs.families:
            raise ValueError(f"language-model arguments need a family of {sorted(ModelArgs.families)}, got {config!r}")
        cls = ModelArgs.families[config["family"]]
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(config) - fields - {"family"})
        if unknown:
            raise ValueError(f"{cls.family} arguments have no fields {unknown}")
        return cls(**{k: v for k, v in config.items() if k != "family"})

    def replace(self, **changes: Any) -> "ModelArgs":
        """These arguments with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)
