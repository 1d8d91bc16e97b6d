"""Where the project's declared models and their generated artifacts live.

``derivations/<model>.py`` (declarations), ``derivations/<model>.tex|.md`` (exports) and
``derivations/generated/<model>.py`` (generated modules). A module of its own so that the code
generator (which writes there) and the registry (which reads there and calls the generator)
need not import each other.
"""
from __future__ import annotations

from pathlib import Path

#: the folder of the declared models (``derivations/`` beside the package)
DERIVATIONS_DIR = Path(__file__).resolve().parent.parent.parent / "derivations"
