"""``autosched model train LOG... -o M``: a cost model from tuning logs of any chips (TenSet-style).

The model file is data (a JSON header and XGBoost's JSON model, :mod:`.pretrained`); use it with
``autosched tune ... --cost-model M``. Workloads are rebuilt from the records' names and arguments:
topi makers, or the ``@workload`` functions of ``--op-file`` files.
"""

from __future__ import annotations

import argparse
from typing import Any


def cmd_model_train(ns: argparse.Namespace) -> int:
    from ..te.workload import load_op_file
    from .pretrained import train_from_logs

    for op_file in ns.op_file or ():
        load_op_file(op_file)  # registers its workloads, so their records can be rebuilt
    model = train_from_logs(ns.logs, ns.output, seed=ns.seed, rounds=ns.rounds)
    skipped = model.header.get("skipped", 0)
    print(model.describe())
    if skipped:
        print(f"{skipped} record(s) not used: their workloads could not be rebuilt (pass their --op-file)")
    return 0


def add_model_parser(sub: Any) -> None:
    m = sub.add_parser("model", help="cost models: train one from tuning logs")
    msub = m.add_subparsers(dest="model_cmd", required=True)
    t = msub.add_parser("train", help="train a cost model on the records of tuning logs (.jsonl, .jsonl.gz)")
    t.add_argument("logs", nargs="+", metavar="LOG")
    t.add_argument("-o", "--output", required=True, help="the model file to write (.json)")
    t.add_argument("--op-file", nargs="+", help="op files whose workloads the logs hold")
    t.add_argument("--rounds", type=int, default=120, help="boosting rounds (default 120)")
    t.add_argument("--seed", type=int, default=0)
    t.set_defaults(func=cmd_model_train)
