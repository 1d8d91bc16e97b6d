"""``replica generate MODEL``: write the numeric module of a model."""
from __future__ import annotations

import argparse

from ..codegen import write_module
from ..derivation import Derivation
from ..outputs import check_output_file
from ..registry import generated_path, load_model


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("generate", help="generate the numeric solver module of a model",
                       description="Derive MODEL and write its numpy module (default "
                                   "derivations/generated/<model>.py).")
    p.add_argument("model", help="a declared model or a path to a .py file defining 'model'")
    p.add_argument("--out", metavar="FILE", help="where to write the module (its directory must exist)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    if args.out:  # its directory must exist: no directory tree appears from a typo
        check_output_file(args.out, "out")
    path = write_module(Derivation(load_model(args.model)), args.out or generated_path(args.model))
    print(f"wrote {path}")
    return 0
