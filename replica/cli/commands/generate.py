"""``replica generate MODEL``: write the numeric module of a model; ``--check``: what is stale."""
from __future__ import annotations

import argparse
import sys

from ...errors import ParameterError
from ...artifacts.freshness import staleness
from ...artifacts.outputs import check_output_file
from ...artifacts.registry import DERIVATIONS_DIR, declaration_path, declared_models, generated_path


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("generate", help="generate the numeric solver module of a model",
                       description="Derive MODEL and write its numpy module (default "
                                   "derivations/generated/<model>.py). With --check, list every declared "
                                   "model's generated module and LaTeX/Markdown exports that are missing or "
                                   "stale (their freshness stamp does not match the declaration or the "
                                   "generator), without deriving anything; exit status 1 if any.",
                       epilog="examples:\n  replica generate attention\n  replica generate --check",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="a declared model or a path to a .py file defining 'model'")
    p.add_argument("--out", metavar="FILE", help="where to write the module (its directory must exist)")
    p.add_argument("--check", action="store_true", help="only report stale generated artifacts")
    p.set_defaults(func=run)
    return p


def stale_artifacts() -> list[tuple[str, str]]:
    """``(artifact, why)`` for every declared model's module and exports that is not fresh."""
    out = []
    for name in declared_models():
        decl = declaration_path(name)
        arts = [(generated_path(name), "module"), (DERIVATIONS_DIR / f"{name}.tex", "export"),
                (DERIVATIONS_DIR / f"{name}.md", "export")]
        for path, kind in arts:
            why = staleness(path, decl, kind)
            if why:
                out.append((str(path.relative_to(DERIVATIONS_DIR.parent)), why))
    return out


def run(args: argparse.Namespace) -> int:
    if args.check:
        stale = stale_artifacts()
        for path, why in stale:
            print(f"{path}: {why}")
        if stale:
            print("regenerate: replica generate MODEL (modules), python derivations/MODEL.py (exports)",
                  file=sys.stderr)
        return 1 if stale else 0
    if not args.model:
        raise ParameterError("model", "give a model to generate (or --check)")
    if args.out:  # its directory must exist: no directory tree appears from a typo
        check_output_file(args.out, "out")
    from ...artifacts.registry import generate  # imports the symbolic pipeline (sympy): only here

    path = generate(args.model, args.out or None)
    print(f"wrote {path}")
    return 0
