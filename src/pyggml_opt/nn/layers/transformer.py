"""GPT-2's transformer block (the language-model architectures' own blocks live in ``models/lm``)."""
from __future__ import annotations

from ...checks import check_int, check_number
from .. import ops as F
from ..ops import Tensor
from .attention import MultiHeadAttention
from .base import LayerShapes, SequenceState
from .block import Block
from .dense import Dropout, Linear
from .norm import LayerNorm


class TransformerBlock(Block):
    """A pre-norm transformer block on a sequence (T, dim) (GPT-2's):
    x + Dropout(MultiHeadAttention(LayerNorm(x))), then x + Dropout(MLP(LayerNorm(x))) with the MLP
    Linear(dim, mlp_ratio * dim), GELU (tanh approximation), Linear(mlp_ratio * dim, dim).

    Sublayers (and parameter prefixes): ``ln1``, ``attn`` (``causal`` and ``rope`` as in
    MultiHeadAttention), ``drop1``, ``ln2``, ``fc1``, ``fc2``, ``drop2``; ``dropout`` is the rate of both
    Dropouts (on the residual branches, as in GPT-2). ``state`` (the padding mask of an
    ``Embedding(mask_zero=True)``, a decoding graph's caches) reaches the attention."""

    keeps_mask = True

    def __init__(self, dim: int, n_heads: int, mlp_ratio: int = 4, dropout: float = 0.0, causal: bool = True,
                 rope: bool = False, eps: float = 1e-5, name: str | None = None) -> None:
        super().__init__(name)
        self.dim = check_int("dim", dim)
        self.n_heads = check_int("n_heads", n_heads)
        self.mlp_ratio = check_int("mlp_ratio", mlp_ratio)
        self.dropout = check_number("dropout", dropout, 0.0, 1.0, hi_open=True)
        self.causal, self.rope = bool(causal), bool(rope)
        self.eps = check_number("eps", eps, 0.0, 1.0, lo_open=True)
        hidden = self.mlp_ratio * self.dim
        self.children = {"ln1": LayerNorm(dim, eps), "attn": MultiHeadAttention(dim, n_heads, causal, rope),
                         "drop1": Dropout(dropout), "ln2": LayerNorm(dim, eps), "fc1": Linear(dim, hidden),
                         "fc2": Linear(hidden, dim), "drop2": Dropout(dropout)}

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 2 or input_shape[1] != self.dim:
            self._fail(input_shape, f"a sequence (T, {self.dim})")
        steps = input_shape[0]
        hidden = (steps, self.mlp_ratio * self.dim)
        return self.infer_children({"ln1": input_shape, "attn": input_shape, "drop1": input_shape, "ln2": input_shape,
                                    "fc1": input_shape, "fc2": hidden, "drop2": input_shape}, tuple(input_shape))

    def forward(self, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        h = self.call("attn", self.call("ln1", x, params), params, state)
        x = F.add(x, self.call("drop1", h, params))
        h = self.call("fc2", F.gelu(self.call("fc1", self.call("ln2", x, params), params)), params)
        return F.add(x, self.call("drop2", h, params))

    def get_config(self) -> dict:
        return {**super().get_config(), "dim": self.dim, "n_heads": self.n_heads, "mlp_ratio": self.mlp_ratio,
                "dropout": self.dropout, "causal": self.causal, "rope": self.rope, "eps": self.eps}
