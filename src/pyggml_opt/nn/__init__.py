"""Graphs: tensor ops, shapes, parameters, forward graphs, layers and networks. Knows nothing of
training: a network is what ``pyggml_opt.training`` trains and ``pyggml_opt.saving`` writes."""
from . import layers, losses, ops
from .backward import check_backward
from .functional import FunctionNetwork
from .graph import AllocGraph, Graph, StaticGraph, output_shape_of
from .network import PACKED_ROWS, Network, check_network, check_rebuilds
from .ops import Tensor
from .params import ParamStore
from .registry import deserialize, register, serialize
from .sequential import SequentialNetwork
from .shapes import MAX_SAMPLE_AXES

__all__ = ["AllocGraph", "FunctionNetwork", "Graph", "MAX_SAMPLE_AXES", "Network", "PACKED_ROWS", "ParamStore", "SequentialNetwork", "StaticGraph", "Tensor",
           "check_backward", "check_network", "check_rebuilds", "deserialize", "layers", "losses", "ops", "output_shape_of",
           "register", "serialize"]
