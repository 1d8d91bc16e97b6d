"""Subcommands of the ``replica`` command line (one module each, see :mod:`replica.cli`)."""
