"""``python -m replica``: the command-line tool (see :mod:`replica.cli`)."""
from .cli import entry

entry()
