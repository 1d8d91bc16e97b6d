"""``python -m tests.oracles [--json] [--models a,b]``: print the reference table (Markdown by default)."""
from __future__ import annotations

import argparse
import json
import sys

from . import MODELS, reference_table

COLUMNS = ("q", "V", "theta", "qhat", "Vhat", "thetahat", "phi", "eps_g")


def _markdown(rows) -> str:
    out = []
    model = None
    for r in rows:
        if r["model"] != model:
            model = r["model"]
            extra = ["classification_error"] if "classification_error" in r else []
            extra += ["zero_fraction"] if "zero_fraction" in r else []
            cols = COLUMNS + tuple(extra)
            out += ["", f"**{model}**", "", "| parameters | α | " + " | ".join(cols) + " |",
                    "|---|---|" + "---|" * len(cols)]
        params = ", ".join(f"{k}={v:g}" for k, v in r["parameters"].items())
        out.append(f"| {params} | {r['alpha']:g} | " + " | ".join(f"{r[c]:.10g}" for c in cols) + " |")
    return "\n".join(out).lstrip("\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.oracles", description=__doc__)
    p.add_argument("--json", action="store_true", help="one JSON list instead of Markdown tables")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {','.join(MODELS)}")
    a = p.parse_args(argv)
    models = tuple(m.strip() for m in a.models.split(",") if m.strip())
    bad = [m for m in models if m not in MODELS]
    if bad:
        p.exit(2, f"{p.prog}: error: --models: unknown model(s) {bad}; choose from {','.join(MODELS)}\n")
    rows = reference_table(models)
    print(json.dumps(rows, indent=1, allow_nan=False) if a.json else _markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
