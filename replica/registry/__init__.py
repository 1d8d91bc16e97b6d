"""The registry: finding a model by name, loading its declaration, and building and loading its
generated module (:mod:`replica.registry.loader`), plus the spectral model of a declaration on a
Gaussian covariate data law (:mod:`replica.registry.spectral`).

It sits above the code generator and both halves of the library it joins: the symbolic
pipeline (a declaration, imported only when a module must be generated) and the numeric one
(what it returns is a :class:`~replica.interface.generated_model.GeneratedModel`).
"""
from __future__ import annotations

from .loader import (DERIVATIONS_DIR, _import_path, aliases, canonical, declaration_path, declared_models,
                     generate, generated_dir, generated_path, load_declaration, load_model, load_module)

__all__ = ["DERIVATIONS_DIR", "aliases", "canonical", "declaration_path", "declared_models", "generate",
           "generated_dir", "generated_path", "load_declaration", "load_model", "load_module"]
