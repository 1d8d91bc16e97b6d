"""``python -m replica``: the command-line tool (see :mod:`replica.cli`)."""
import sys

from .cli import main

sys.exit(main())
