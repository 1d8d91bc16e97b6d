"""Code generation: a :class:`~replica.symbolic.derivation.Derivation` -> a thin numeric module.

Like ``pydy``'s ``generate_ode_function``, the generator is separated from the derivation
(:mod:`replica.codegen.generator` lists the model's functions as backend-neutral specs) and
writes them through a backend (:mod:`replica.codegen.backends`): :class:`KernelBackend` writes
every function once, common-subexpression-eliminated, in *kernel form* -- text that numpy runs on
arrays of quadrature nodes and numba compiles for one node. :mod:`replica.interface.generated_model` builds
the vectorised functions from the kernels (:class:`~replica.interface.generated_model.GeneratedModel`, what
:func:`replica.registry.load_module` returns); :mod:`replica.numeric.compiled` compiles the per-node
kernels together with the generic kernels of :mod:`replica.numeric.kernels`. A generated module holds the
model's mathematics only -- the generic numerics are library code -- and never imports sympy, so
solving does not pay for symbolic work.

Each function comes from one factor of the free entropy (:data:`FACTOR_OF`: the trace potential,
the penalty, the loss, the channel, the data law) or is the model's own (its observables and
constraints). In the cache the model's module keeps its own functions, the metadata and the table,
and imports the rest from one kernel file per factor named by the hash of its text
(:func:`generate_sources`, :func:`~replica.interface.generated_model.factor_kernels`): models whose
factor generates the same code share one file. ``replica generate MODEL --out FILE.py`` writes the
same kernels in place, one self-contained file (:func:`generate_module`).

The contract, as :class:`~replica.interface.generated_model.GeneratedModel` reads it (names are stable, see
:data:`MODULE_API`):

* a freshness stamp line ``replica-artifact: version=... declaration=... generator=...``
  (:mod:`replica.artifacts.freshness`: the one record of what the module was generated from);
* ``FUNCTIONS``: how each vectorised function is built from a kernel (see
  :class:`KernelBackend`), and ``N_CONSTANTS``;
* metadata: ``MODEL``, ``L, R, R_T``,
  ``PARAMETERS`` (names), ``DEFAULTS``, ``DOMAINS``, ``ORDER_PARAMETERS``,
  ``CONJUGATES``, ``FAMILIES`` (family -> indices into the order vector),
  ``SYMMETRIC_DIAGONAL`` (indices of diagonal entries of ``q`` and ``V``), ``BRANCHES``,
  ``TRANSITION`` (the pair of branches whose free entropies cross, or None), ``BASELINE``,
  ``PROX_DIM``, ``GAUSSIANS``, ``VALIDITY``, ``SIGN_FLIPS``;
* ``entropic_update(xhat, p) -> x`` and ``entropic_potential(xhat, p)`` (``ENTROPIC = "closed"``,
  a quadratic regularizer); for a general separable regularizer (``ENTROPIC = "envelope"``)
  instead ``entropic_from_gradient(dpsi_w, p)``, ``entropic_bracket``,
  ``entropic_parameter_gradient``, ``entropic_validity`` and ``entropic_argmin`` (closed-form
  prox) or ``entropic_bracket_newton`` / ``entropic_starts`` (numeric prox), averaged over
  ``ENTROPIC_GAUSSIANS`` by the solver;
* ``energetic_update(dpsi_y, alpha) -> xhat`` (the linear map from the trace potential);
* ``trace_potential(x, xhat)``;
* ``bracket(h, z, x, p)``, ``bracket_newton(h, z, x, p) -> (F, dF/dh, d2F/dh2)``,
  ``bracket_parameter_gradient(h, z, x, p) -> dF/dx`` (envelope theorem);
* ``prox_starts(z, x, p) -> (S, PROX_DIM, ...)``;
* ``test_loss(z, x, p)`` (the loss at ``h = omega``: the integrand of ``eps_g``);
* observables (:mod:`replica.symbolic.observables`): ``OBSERVABLES`` (names, ``eps_g`` first),
  ``TEST_OBSERVABLES`` / ``N_OBSERVABLES`` and ``test_observables(z, x, p) -> (N_OBSERVABLES, ...)``
  (integrands at ``h = omega``), ``ENTROPIC_OBSERVABLES`` and, for a Moreau-envelope entropic
  side, ``entropic_observables(w, zw, xhat, p)`` (integrands at the entropic minimiser);
* ``validity(x, p)`` (quantities that must be positive, named in ``VALIDITY``);
* if the model has a target ``T``: ``target_entries(z, p)`` (``T(h*)`` entries with
  ``h*_l = rho_l^{1/2} eta_l``, ``z = eta``), ``rho_bar(p)``.

* token clusters only (docs/explanation/theory.md §8): ``z`` carries the one-hot label indicators ``DISCRETE``
  after the ``GAUSSIANS``; ``SLOTS`` (slot labels), ``CONFIGURATIONS`` (indicator values
  of every label configuration), ``LABELS`` (its cluster per token),
  ``label_probabilities(p)`` (their law) and ``token_rho_bar(z, p)`` (each token's
  ``rho_bar`` at a node). Averages run over Gaussian nodes x configurations
  (:mod:`replica.numeric.labels`). Modules without clusters define none of these;
* ``SYMMETRIES``: ``(families, gaussian indices)`` pairs: with those families pinned to
  zero, flipping the sign of those ``z`` entries leaves the minimum of the bracket and the
  other families' ``dF/dx`` unchanged (docs/explanation/theory.md §6, derived by
  :mod:`replica.symbolic.symmetries`; used to fold quadrature rules); ``MIRRORED``: per pair,
  whether it maps the minimiser to ``-h``;
* per-node leaves (:data:`NODE_API`, the kernels of the functions with a
  :class:`~replica.codegen.backends.NodeForm`): ``node_constants(z, x, p, c)``,
  ``node_bracket_newton(h, c, g, H) -> F``, ``node_parameter_gradient(h, z, x, p, G)``,
  ``node_starts(z, x, p, out)``, ``node_test_observables(z, x, p, out)``, ``node_weight(z, x, p)``;
  ``bracket_newton`` and friends are built from them. The generic kernels that call them
  (``node_prox_average``, ``node_test_average``) are library code (:mod:`replica.numeric.kernels`),
  compiled together with them by :mod:`replica.numeric.compiled`. A piecewise loss has none (its prox is
  :func:`replica.numeric.prox.piecewise_prox` on the vectorised functions).

Arrays: ``x``/``xhat`` are 1-d in ``ORDER_PARAMETERS``/``CONJUGATES`` order, ``p`` in
``PARAMETERS`` order; ``h`` has shape ``(PROX_DIM, ...)`` and ``z`` shape
``(len(GAUSSIANS), ...)`` with broadcastable trailing node axes.
"""
from __future__ import annotations

from .backends import Backend, Function, KernelBackend, NodeForm, default_backends
from .generator import FACTOR_OF, GeneratedSources, generate_module, generate_sources, model_functions, write_module

MODULE_API = (
    "entropic_update", "entropic_potential", "energetic_update", "trace_potential", "bracket",
    "bracket_newton", "bracket_parameter_gradient", "prox_starts", "test_loss", "test_observables", "validity",
)

#: per-node leaves (see :class:`KernelBackend` and :mod:`replica.numeric.compiled`)
NODE_API = ("node_constants", "node_bracket_newton", "node_parameter_gradient", "node_starts",
            "node_test_observables", "node_weight")

__all__ = ["Backend", "FACTOR_OF", "Function", "GeneratedSources", "KernelBackend", "MODULE_API", "NODE_API",
           "NodeForm", "default_backends", "generate_module", "generate_sources", "model_functions", "write_module"]
