"""Models as graphs of te computations: fusion into tasks, memory planning, compiled models.

- ``ir``: :class:`Graph`, the interface with the frontends (one te program, inputs, weights, outputs).
- ``pattern`` / ``fuse``: operator patterns and fusion along post-dominators (TVM FuseOps' rules).
- ``tasks``: fused groups as deduplicated te workloads (one task per structural key, with a weight).
- ``memory`` / ``plan``: the static memory plan and the JSON execution plan.
- ``compiled``: :func:`compile_model` and :class:`CompiledModel` (``model.run({name: array})``).
- ``weights`` / ``export`` / ``load`` / ``c_api``: model directories (``autosched build model.onnx``).
"""
