"""Rewrite the golden files of the code generator: ``python tests/golden/regenerate.py``.

Each golden file is what ``replica generate MODEL --out tests/golden/MODEL.py`` writes, for the
models of :data:`MODELS`; tests/test_symbolic.py compares a fresh generation with it byte for byte
(its freshness stamp line aside). Regenerate them after a change to the generator that is meant
to change its output, and read the diff before committing it.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: two small models: a closed-form entropic side with a smooth loss (ridge) and a teacher channel
#: with a label (logistic)
MODELS = ("ridge", "logistic")

if __name__ == "__main__":
    for name in MODELS:
        subprocess.run([sys.executable, "-m", "replica", "generate", name, "--out", str(HERE / f"{name}.py")],
                       cwd=HERE.parent.parent, check=True)
