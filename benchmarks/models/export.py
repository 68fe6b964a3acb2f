"""Export the model set to ONNX with ``torch.onnx.export``: torchvision CNNs and transformers encoders.

Random weights throughout (``weights=None``, configs built in code): nothing is downloaded. torch,
torchvision and transformers are needed here only, never to import or run an exported model.

    python benchmarks/models/export.py --out /tmp/models            # the small set (CI sizes)
    python benchmarks/models/export.py --out /tmp/models --full     # full sizes

From Python: ``path = export_model("resnet18", "/tmp/models", small=True)``.
"""

from __future__ import annotations

import argparse
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 17


@dataclass(frozen=True)
class ModelSpec:
    """A torch module and example inputs (numpy, by ONNX input name) for one model at one size."""

    module: Any
    inputs: dict[str, np.ndarray]
    output_names: tuple[str, ...]


def _skip_torchvision_ops() -> None:
    """Let torchvision import without its compiled ops (installed --no-deps, they do not load).

    transformers imports torchvision too (for image models), so the text models need this as well.
    """
    name = "torchvision._meta_registrations"
    if name not in sys.modules:
        sys.modules[name] = types.ModuleType(name)  # registers fake kernels for ops we never call


def _torchvision_models() -> Any:
    _skip_torchvision_ops()
    import torchvision.models

    return torchvision.models


def _image(size: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((1, 3, size, size)).astype("float32")}


def _cnn(factory: str) -> Callable[[bool], ModelSpec]:
    def make(small: bool) -> ModelSpec:
        model = getattr(_torchvision_models(), factory)(weights=None)
        _randomize_batch_norm(model)
        return ModelSpec(model.eval(), _image(64 if small else 224), ("output",))

    return make


def _randomize_batch_norm(model: Any) -> None:
    """Fresh running statistics and affine parameters, so folding batch norm is really exercised."""
    import torch

    gen = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


class _LastHidden:
    """Wraps a transformers model so that the ONNX graph has one output: the last hidden state."""

    def __new__(cls, model: Any) -> Any:
        import torch

        class Wrapper(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        return Wrapper()


def _token_inputs(seq: int, vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.ones((1, seq), np.int64)
    mask[0, seq - seq // 4 :] = 0  # padded tail: the mask must matter
    return {"input_ids": rng.integers(0, vocab, (1, seq), dtype=np.int64), "attention_mask": mask}


def bert(small: bool) -> ModelSpec:
    """BERT-base's shape (12 layers, hidden 768, 12 heads, sequence 128; small: 2 layers, hidden 64, seq 16).

    Random weights from a config, offline; the vocabulary is BERT's 30522 words in full size.
    """
    _skip_torchvision_ops()
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    layers, hidden, heads, seq, vocab = (2, 64, 4, 16, 1000) if small else (12, 768, 12, 128, 30522)
    config = BertConfig(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=4 * hidden, max_position_embeddings=512, attn_implementation="eager",
    )  # fmt: skip
    model = BertModel(config, add_pooling_layer=False).eval()
    return ModelSpec(_LastHidden(model).eval(), _token_inputs(seq, config.vocab_size), ("last_hidden_state",))


def gpt2(small: bool) -> ModelSpec:
    """GPT-2-style decoder blocks with the causal mask: 2 blocks, hidden 256, seq 128 (small: 64, 16)."""
    _skip_torchvision_ops()
    import torch
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    hidden, seq = (64, 16) if small else (256, 128)
    config = GPT2Config(
        vocab_size=1000, n_positions=512, n_embd=hidden, n_layer=2, n_head=4, use_cache=False,
        bos_token_id=0, eos_token_id=0, attn_implementation="eager",
    )  # fmt: skip
    model = GPT2Model(config).eval()
    inputs = _token_inputs(seq, config.vocab_size)
    inputs["attention_mask"][:] = 1  # a decoder sees its whole prefix; the causal mask does the rest
    return ModelSpec(_LastHidden(model).eval(), inputs, ("last_hidden_state",))


MODELS: dict[str, Callable[[bool], ModelSpec]] = {
    "resnet18": _cnn("resnet18"),
    "resnet50": _cnn("resnet50"),
    "mobilenet_v2": _cnn("mobilenet_v2"),
    "bert": bert,
    "gpt2": gpt2,
}


def export_model(name: str, out_dir: str | Path, small: bool = True) -> Path:
    """Write ``out_dir/<name>[_small].onnx`` (legacy TorchScript exporter, opset 17) and return its path."""
    import torch

    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    spec = MODELS[name](small)
    path = Path(out_dir) / f"{name}{'_small' if small else ''}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    args = tuple(torch.from_numpy(a) for a in spec.inputs.values())
    with torch.no_grad():
        torch.onnx.export(
            spec.module, args, str(path), input_names=list(spec.inputs), output_names=list(spec.output_names),
            opset_version=OPSET, do_constant_folding=True, dynamo=False,
        )  # fmt: skip
    return path


def example_inputs(name: str, small: bool = True, seed: int = 1) -> dict[str, np.ndarray]:
    """Fresh random inputs for the exported model (the same names, shapes and dtypes)."""
    spec_inputs = MODELS[name](small).inputs
    if "input" in spec_inputs:
        return _image(spec_inputs["input"].shape[-1], seed)
    out = _token_inputs(spec_inputs["input_ids"].shape[1], 1000, seed)
    out["attention_mask"] = spec_inputs["attention_mask"]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="directory for the .onnx files")
    p.add_argument("--full", action="store_true", help="full sizes (default: the small CI set)")
    p.add_argument("models", nargs="*", default=list(MODELS), help=f"some of {', '.join(MODELS)}")
    ns = p.parse_args(argv)
    for name in ns.models:
        print(export_model(name, ns.out, small=not ns.full))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
