"""ONNX import: ``from_onnx(model_or_path, input_shapes)`` -> :class:`autosched.graph.ir.Graph`.

Needs the ``onnx`` extra. Importing this package registers every converter (one module per op
family); :mod:`.backend` runs the ONNX backend node tests on generated kernels.
"""

from ...errors import OnnxImportError
from . import (
    ops_attention,
    ops_elementwise,
    ops_image,
    ops_index,
    ops_loss,
    ops_nn,
    ops_norm,
    ops_reduce,
    ops_tensor,
    ops_trig,
)
from .importer import from_onnx, load_model
from .registry import MAX_OPSET, supported_ops

# Importing these modules registered their converters.
CONVERTER_MODULES = (
    ops_attention, ops_elementwise, ops_image, ops_index, ops_loss, ops_nn, ops_norm, ops_reduce, ops_tensor,
    ops_trig,
)  # fmt: skip

__all__ = ["MAX_OPSET", "OnnxImportError", "from_onnx", "load_model", "supported_ops"]
