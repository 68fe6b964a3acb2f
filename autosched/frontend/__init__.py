"""Model frontends: a model file becomes an :class:`autosched.graph.ir.Graph` of te computations.

``autosched.frontend.onnx.from_onnx("model.onnx")`` needs the ``onnx`` extra; nothing here imports
``onnx`` until that subpackage is imported, so ``import autosched`` never does.
"""
