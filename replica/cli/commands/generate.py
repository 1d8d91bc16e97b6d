"""``replica generate MODEL``: generate the numeric module of a model; ``--check``: which exports are stale."""
from __future__ import annotations

import argparse
import sys

from ...errors import ParameterError
from ...artifacts.freshness import staleness
from ...artifacts.outputs import check_output_file
from ...registry import DERIVATIONS_DIR, declaration_path, declared_models


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("generate", help="generate the numeric solver module of a model",
                       description="Derive MODEL and generate its numpy module. Generated modules are a build "
                                   "product: every command generates the one it needs into the cache at first "
                                   "use; this command generates it anew there, or writes it to FILE.py with "
                                   "--out (to read or ship it). With --check, list every declared model's "
                                   "LaTeX/Markdown exports that are missing or stale (their freshness stamp "
                                   "does not match the declaration or the generator), without deriving "
                                   "anything; exit status 1 if any.",
                       epilog="examples:\n  replica generate attention --out attention_tied.py\n"
                              "  replica generate --check",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="a declared model or a path to a .py file defining 'model'")
    p.add_argument("--out", metavar="FILE.py", help="write the module here (its directory must exist) instead of "
                                                    "into the cache")
    p.add_argument("--check", action="store_true", help="only report stale exports")
    p.set_defaults(func=run)
    return p


def stale_artifacts() -> list[tuple[str, str]]:
    """``(artifact, why)`` for every declared model's committed export (.tex, .md) that is not fresh."""
    out = []
    for name in declared_models():
        decl = declaration_path(name)
        for path in (DERIVATIONS_DIR / f"{name}.tex", DERIVATIONS_DIR / f"{name}.md"):
            why = staleness(path, decl, "export")
            if why:
                out.append((str(path.relative_to(DERIVATIONS_DIR.parent)), why))
    return out


def run(args: argparse.Namespace) -> int:
    if args.check:
        stale = stale_artifacts()
        for path, why in stale:
            print(f"{path}: {why}")
        if stale:
            print("regenerate: python derivations/MODEL.py", file=sys.stderr)
        return 1 if stale else 0
    if not args.model:
        raise ParameterError("model", "give a model to generate (or --check)")
    if args.out:  # its directory must exist: no directory tree appears from a typo
        check_output_file(args.out, "out")
        from ...registry import generate  # imports the symbolic pipeline (sympy): only here

        path = generate(args.model, args.out)
    else:
        from ...registry import load_module

        path = load_module(args.model, regenerate=True).path
    print(f"wrote {path}")
    return 0
