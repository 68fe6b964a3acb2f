"""Pretrained cost models: trained on the logs of several chips, saved as data, refused when stale.

A model file is one JSON object: a header (format, the feature set it was trained on, the chips and
workloads of its logs) and the booster in XGBoost's own JSON model format. Never pickled. The
feature set is identified by :data:`FEATURE_SET_VERSION` and a hash of the feature names
(:data:`~.features.FEATURE_NAMES`, chip facts included), so a model trained on another layout is
refused with both versions named, never silently used.

Example::

    model = train_from_logs(["a.jsonl", "b.jsonl.gz"], "model.json")   # `autosched model train`
    model = PretrainedModel.load("model.json")                         # `autosched tune --cost-model`
    scores = model.predict(X)                                          # higher is faster
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FAILED_COST, AutoschedError
from .features import FEATURE_COUNT, FEATURE_NAMES

FORMAT = "autosched-cost-model"
FORMAT_VERSION = 1
FEATURE_SET_VERSION = 1  # bump when a feature changes meaning without changing its name
SHIPPED = Path(__file__).parent / "pretrained" / "default.json"


class CostModelError(AutoschedError):
    """A cost-model file that cannot be used: unreadable, another format, or another feature set."""


def feature_set() -> dict[str, Any]:
    """The feature set this autosched computes, as stored in a model's header."""
    digest = hashlib.sha256("\n".join(FEATURE_NAMES).encode()).hexdigest()[:16]
    return {"version": FEATURE_SET_VERSION, "count": FEATURE_COUNT, "names_sha256": digest}


def feature_set_id(fs: dict[str, Any]) -> str:
    """``"v1/322/ab12..."``: version, count and names hash, as error messages name them."""
    return f"v{fs.get('version')}/{fs.get('count')}/{fs.get('names_sha256')}"


# Workloads from records ------------------------------------------------------------------------------
def topi_instance(maker: str, args: dict[str, Any]) -> Any:
    """The workload ``autosched.topi.workloads.make_<maker>(**args)``, named so its records rebuild it."""
    from ..te.workload import WorkloadInstance
    from ..topi import workloads

    fn = getattr(workloads, f"make_{maker}", None)
    if fn is None:
        raise CostModelError(f"no topi workload maker make_{maker}")
    return WorkloadInstance(maker, dict(args), tuple(fn(**args)))


def resolve(name: str, args: dict[str, Any], key: str | None = None) -> Any:
    """The workload a record names: a registered ``@workload`` (op files loaded), else a topi maker;
    None when neither builds it. With ``key`` (the record's workload key) only a workload with that
    key is taken: a registered op of the same name but other math (say an op file's own ``matmul``)
    must not stand in for the topi one the record measured."""
    from ..te.workload import REGISTRY

    fixed = {k: tuple(v) if isinstance(v, list) else v for k, v in args.items()}  # JSON made tuples lists
    builders = [lambda: REGISTRY[name].instantiate(**fixed)] if name in REGISTRY else []
    builders.append(lambda: topi_instance(name, fixed))
    for build in builders:
        try:
            inst = build()
        except (AutoschedError, TypeError, ValueError):
            continue
        if key is None or inst.key == key:
            return inst
    return None


def read_records(path: str | Path) -> list[Any]:
    """The records of a log, plain or gzipped (``.gz``); lines that do not parse are skipped."""
    from ..records.record import TuningRecord

    path = Path(path)
    if not path.exists():
        raise CostModelError(f"tuning log {path} not found")
    opener: Any = gzip.open if path.suffix == ".gz" else open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                try:
                    out.append(TuningRecord.from_json_line(line))
                except AutoschedError:
                    continue
    return out


# The model -----------------------------------------------------------------------------------------
@dataclass
class PretrainedModel:
    """An :class:`~.xgb.XGBModel` booster with the header that says what it was trained on."""

    model: Any  # XGBModel
    header: dict[str, Any] = field(default_factory=dict)
    path: str = ""

    @property
    def trained(self) -> bool:
        return bool(self.model.trained)

    def predict(self, features: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(features), dtype=np.float64)

    def describe(self) -> str:
        h = self.header
        return (f"cost model {self.path or '(unsaved)'}: {h.get('records', 0)} records of "
                f"{h.get('workloads', 0)} workload(s) on {len(h.get('chips', []))} chip(s), "
                f"feature set {feature_set_id(h.get('feature_set', {}))}")  # fmt: skip

    def save(self, path: str | Path) -> None:
        if not self.model.trained:
            raise CostModelError("the cost model has not been trained (no successful records?)")
        raw = self.model.booster.save_raw("json")
        self.header.update(format=FORMAT, format_version=FORMAT_VERSION, feature_set=feature_set(),
                           objective=self.model.objective)  # fmt: skip
        data = {**self.header, "booster": json.loads(bytes(raw).decode())}
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, separators=(",", ":")) + "\n")
        self.path = str(path)

    @classmethod
    def load(cls, path: str | Path, *, nthread: int = 1) -> PretrainedModel:
        """The model in ``path``; refused (CostModelError) unless its feature set is this autosched's."""
        import xgboost as xgb

        from .xgb import OBJECTIVES, XGBModel

        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise CostModelError(f"cost model {path} not found") from None
        except (OSError, ValueError) as e:
            raise CostModelError(f"cost model {path} is not a JSON model file: {e}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CostModelError(
                f"cost model {path} is not an {FORMAT} file (made by `autosched model train`)"
            )
        if data.get("format_version") != FORMAT_VERSION:
            raise CostModelError(f"cost model {path} has format version {data.get('format_version')}; "
                                 f"this autosched reads version {FORMAT_VERSION}")  # fmt: skip
        theirs, ours = data.get("feature_set") or {}, feature_set()
        if theirs != ours:
            raise CostModelError(
                f"cost model {path} was trained on feature set {feature_set_id(theirs)}; this autosched "
                f"computes feature set {feature_set_id(ours)}: retrain it (autosched model train LOG... -o M)"
            )
        booster = xgb.Booster(params={"nthread": nthread})
        booster.load_model(bytearray(json.dumps(data.pop("booster")).encode()))
        objective = str(data.get("objective")) if data.get("objective") in OBJECTIVES else "rank"
        model = XGBModel(objective, nthread=nthread)
        model.booster = booster
        return cls(model, data, str(path))


def model_path(spec: str | None) -> Path | None:
    """The file ``--cost-model`` names: a path, ``"auto"`` (the shipped model, None if absent) or
    ``"none"``/None (no model)."""
    if spec is None or spec == "none":
        return None
    if spec == "auto":
        return SHIPPED if SHIPPED.exists() else None
    return Path(spec)


def load_cost_model(spec: str | None) -> PretrainedModel | None:
    """``--cost-model``: the model :func:`model_path` names, or None."""
    path = model_path(spec)
    return None if path is None else PretrainedModel.load(path)


# Training ------------------------------------------------------------------------------------------
def _features(rec: Any, inst: Any, chip: Any) -> np.ndarray | None:
    from ..lower.pipeline import lower
    from ..search_space.schedule import replay
    from .features import candidate_features

    try:
        sch = replay(list(inst.outputs), rec.trace)
        return candidate_features(lower(sch, [*inst.inputs, *inst.outputs]), chip)
    except (AutoschedError, ValueError, KeyError, IndexError, TypeError):
        return None


def train_from_logs(
    paths: Sequence[str | Path], out: str | Path | None = None, *, seed: int = 0, rounds: int = 120
) -> PretrainedModel:
    """Train on every record the logs hold, each with the facts of its own chip, grouped by workload
    and chip (labels relative within a group); saved to ``out`` when given. Records whose workload
    cannot be rebuilt (:func:`resolve`) are counted in the header, not used."""
    from ..chip import chip_from_json
    from .xgb import XGBModel

    model = XGBModel("rank", seed=seed, rounds=rounds)
    chips: dict[str, Any] = {}
    insts: dict[tuple[str, str], Any] = {}
    used, skipped, groups = 0, 0, set()
    for path in paths:
        rows: dict[str, tuple[list[np.ndarray], list[float]]] = {}
        for rec in read_records(path):
            key = (rec.workload_name, json.dumps(rec.workload_args, sort_keys=True))
            if key not in insts:
                insts[key] = resolve(rec.workload_name, rec.workload_args, rec.workload_key)
            inst = insts[key]
            chip = chips.setdefault(rec.fingerprint, chip_from_json(rec.chip))
            feats = None if inst is None else _features(rec, inst, chip)
            if feats is None:
                skipped += 1
                continue
            group = f"{rec.workload_key}@{rec.fingerprint}"
            r, y = rows.setdefault(group, ([], []))
            r.append(feats)
            y.append(rec.mean_cost if rec.ok else FAILED_COST)
            used += 1
        for group, (r, y) in rows.items():
            model.add(group, np.stack(r), y)
            groups.add(group)
    if used == 0:
        raise CostModelError(
            f"no usable records in {', '.join(map(str, paths))} (workloads not rebuildable?)"
        )
    model.fit()
    header = {"records": used, "skipped": skipped, "groups": len(groups),
              "workloads": len({g.split('@')[0] for g in groups}), "chips": sorted(chips),
              "logs": [Path(p).name for p in paths]}  # fmt: skip
    pm = PretrainedModel(model, header)
    if out is not None:
        pm.save(out)
    return pm
