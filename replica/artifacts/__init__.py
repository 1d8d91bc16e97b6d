"""File helpers: atomic outputs, strict JSON, the user cache and its writable folders, the
freshness stamps of generated artifacts and where the declarations live. Below the numerics
and the symbolic pipeline; loading a model is :mod:`replica.registry`'s."""
