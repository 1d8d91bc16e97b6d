"""Per-model declarations (each a short file), their exported LaTeX and generated solvers.

Every module here defines ``model`` (a :class:`replica.Model`) or a ``build(**options)``
function returning one; :mod:`replica.registry` lists them for ``replica models``.
``ALIASES`` gives short names the command line accepts for some of them (read as a literal by
:func:`replica.registry.aliases`, never imported by the library).
"""

ALIASES = {"attention": "attention_tied"}
