"""``replica models``: list the declared models."""
from __future__ import annotations

import argparse

from ...registry import aliases, declared_models, load_declaration


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("models", help="list the declared models",
                       description="List the models declared in derivations/ (one short file each).")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    short = {v: k for k, v in aliases().items()}
    for name in declared_models():
        mod = load_declaration(name)
        model = getattr(mod, "model", None)
        desc = model.description if model is not None else "(no 'model' defined)"
        alias = f" (alias: {short[name]})" if name in short else ""
        branches = ", ".join(model.branches) if model is not None and model.branches else "-"
        extra = ""
        if model is not None and model.transition:
            extra += f"; transition: {model.transition[0]} (large alpha) vs {model.transition[1]}"
        if model is not None and model.baseline:
            extra += f"; baseline: {model.baseline}"
        observables = ", ".join(o.name for o in model.observables) if model is not None else "-"
        print(f"{name}{alias}\n    {desc}\n    branches: {branches}{extra}\n    observables: {observables}")
    return 0
