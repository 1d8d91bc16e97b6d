"""Where the project's declared models and their committed exports live.

``derivations/<model>.py`` (declarations) and ``derivations/<model>.tex|.md`` (exports); generated
modules are a build product in the cache (:mod:`replica.registry`).
"""
from __future__ import annotations

from pathlib import Path

#: the folder of the declared models (``derivations/`` beside the package)
DERIVATIONS_DIR = Path(__file__).resolve().parent.parent.parent / "derivations"
