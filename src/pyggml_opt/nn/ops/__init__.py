"""Tensor ops that build ggml graphs, for ``FunctionModel`` and for layers (``pgo.ops``).

Shapes are in numpy order (the batch axis first). Every op checks its arguments and raises
``ValueError`` / ``TypeError`` before ggml could assert. One module per kind of op; this package
gathers them in one namespace."""
from .tensor import (Tensor, abs, clamp, check_tensor, graph_context, new_input, wrap, add, cont, contiguous, div, exp, log, mul, neg,
                     relu, scale, silu, softplus, sqr, sqrt, sub)
from .shape import columns, concat, embedding, flatten, last_steps, permute, pick, reshape, rows, select, to_int32
from .reductions import mean, sum, sum_rows
from .linalg import linear, mul_mat
from .conv import conv_1d, conv_2d, pool_2d
from .activations import cross_entropy_ids, gelu, log_softmax, log_sum_exp, sigmoid, softmax, swiglu, tanh
from .norm import batch_norm, layer_norm, rms_norm
from .attention import (attention, attention_mask, cache_columns, cache_rows, cached_attention, causal_mask, document_mask, padding_mask,
                        rope, token_mask)

__all__ = ['Tensor', 'abs', 'add', 'attention', 'attention_mask', 'cache_columns', 'cache_rows', 'cached_attention', 'batch_norm', 'causal_mask', 'clamp', 'document_mask', 'check_tensor', 'columns', 'concat', 'cont', 'contiguous', 'conv_1d',
           'conv_2d', 'cross_entropy_ids', 'div', 'embedding', 'exp', 'flatten', 'gelu', 'graph_context', 'last_steps', 'layer_norm', 'linear', 'log',
           'log_softmax', 'log_sum_exp', 'mean', 'mul', 'mul_mat', 'neg', 'padding_mask', 'new_input', 'permute', 'pick', 'pool_2d', 'relu', 'reshape',
           'rms_norm', 'rope', 'rows', 'select', 'scale', 'sigmoid', 'silu', 'softmax', 'softplus', 'sqr', 'sqrt', 'sub', 'sum', 'sum_rows', 'swiglu',
           'tanh', 'to_int32', 'token_mask', 'wrap']
