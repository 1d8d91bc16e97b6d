"""The Bayes-optimal module of a model: a :class:`~replica.symbolic.bayes.BayesDerivation` -> kernels.

The same code generation as the empirical-risk module (:mod:`replica.codegen.generator`): the model's
functions are backend-neutral :class:`~replica.codegen.backends.Function` specs, written once in
kernel form by :class:`~replica.codegen.backends.KernelBackend` (numpy on node arrays), with a stamp
that names what the module came from (:mod:`replica.artifacts.freshness`, kind ``bayes``). The generic
numerics -- the log-sum-exp of the prior's terms, the quadratures, the fixed point, the thresholds --
are library code (:mod:`replica.numeric.bayes`).

The module's contract (read by :class:`replica.numeric.bayes_model.BayesModel`):

* metadata: ``MODEL``, ``K`` (teacher fields), ``R`` (student fields of the declared loss),
  ``PARAMETERS``, ``DEFAULTS``, ``DOMAINS``, ``CONSTRAINTS``, ``PRIOR`` (``"mixture"`` or ``"density"``),
  ``PRIOR_NAME``, ``N_TERMS``, ``SUPPORT``, ``N_KINKS``, ``LABEL_VALUES`` (``None``: a continuous label),
  ``N_SWITCHES``, ``NOISE_PARAMETERS``;
* ``prior_terms(A, p) -> (c0, b, G)``: the terms ``c0_j - 1/2 b_j^T A b_j + b_j^T B + 1/2 B^T G_j B`` of
  ``log Z_0(B, A)``
  (``A``: the independent entries of ``qhat``, with node axes), and ``prior_teacher(p) -> (weight, mean,
  cov)``: the teacher's law on every term's mixture component; ``prior_moments(p) -> (mean, rho)``;
  for a density instead ``prior_log_density(w, p)`` and ``prior_kinks(p)``;
* ``output_law(omega, y, V, p) -> (log Z_out, g_out, d g_out / d omega)`` (``omega``, ``y`` with node
  axes; ``V``: the independent entries of the posterior covariance); ``output_switches(p) -> (forms,
  offsets, extra)``: where ``Z_out`` switches; for a continuous label ``label_law(omega, V, p) -> (mean,
  variance)`` of ``y`` given ``omega``;
* ``test_loss(h, y, p)``: the declared loss at the student fields ``h`` and the label ``y``.
"""
from __future__ import annotations

from pathlib import Path

import sympy as sp

from ..artifacts.freshness import current_stamp
from ..artifacts.outputs import atomic_write_text
from ..symbolic.bayes import BayesDerivation
from ..symbolic.symbols import independent_symbols
from .backends import Function, KernelBackend
from .printers import KernelPrinter

#: the array helpers a Bayes-optimal kernel may call (:mod:`replica.numeric.bayes_model` defines them)
HELPERS = ("_bvn", "_erfc", "_exp", "_log_ndtr", "_ndtr", "_where")


class BayesPrinter(KernelPrinter):
    """:class:`~replica.codegen.printers.KernelPrinter` plus ``log Phi`` (``_log_ndtr``)."""

    def _print_LogNormalCDF(self, expr):
        return f"_log_ndtr({self._print(expr.args[0])})"


class BayesBackend(KernelBackend):
    """:class:`~replica.codegen.backends.KernelBackend` with :class:`BayesPrinter`."""

    def __init__(self) -> None:
        super().__init__()
        self.printer = BayesPrinter({"fully_qualified_modules": True, "inline": True,
                                     "allow_unknown_functions": False})


def bayes_functions(d: BayesDerivation) -> list[Function]:
    """Every function of the Bayes-optimal module (see the module docstring)."""
    F = Function.make
    K, out, inp = d.K, d.output, d.input
    p_arg = ("_p", d.parameters)
    A_syms = independent_symbols(inp.A)
    V_syms = independent_symbols(out.V)
    fns: list[Function] = []
    if inp.terms is not None:
        T = inp.terms
        # c0_j = c_j + 1/2 b_j^T A b_j: for a point mass at a, c_j = log weight - 1/2 a^T A a and b_j = a, so c0_j is
        # the log weight exactly -- the numerics never subtract two numbers of size A (a +-1 prior at A = 1e100)
        c0 = [sp.simplify(sp.expand(t.c + (t.b.T * inp.A * t.b)[0, 0] / 2)) for t in T]
        fns.append(F("prior_terms", [("_A", A_syms), p_arg],
                     [c0, [t.b[k] for t in T for k in range(K)],
                      [t.G[i, j] for t in T for i in range(K) for j in range(K)]],
                     "Terms c0_j - 1/2 b_j^T A b_j + b_j^T B + 1/2 B^T G_j B of log Z_0(B, A): c0 (N_TERMS), b "
                     "(N_TERMS*K), G (N_TERMS*K*K), at the independent entries A of qhat.", node_args=("_A",)))
        fns.append(F("prior_teacher", [p_arg],
                     [[t.weight for t in T], [t.mean[k] for t in T for k in range(K)],
                      [t.cov[i, j] for t in T for i in range(K) for j in range(K)]],
                     "The teacher's row on every term's mixture component: weight, mean (N_TERMS*K), covariance "
                     "(N_TERMS*K*K)."))
        fns.append(F("prior_moments", [p_arg], [[inp.prior.mean(), d.rho]],
                     "Mean and second moment rho of one entry of the teacher's row."))
    else:
        fns.append(F("prior_log_density", [("_w", [inp.w]), p_arg], [inp.log_density],
                     "log p(w) of the prior's density (unnormalised).", node_args=("_w",)))
        if inp.kinks:
            fns.append(F("prior_kinks", [p_arg], [list(inp.kinks)], "Where the density is not smooth."))
    fns.append(F("output_law", [("_omega", out.omega), ("_y", [out.label]), ("_V", V_syms), p_arg],
                 [out.log_z, list(out.g), [e for row in out.dg for e in row]],
                 "log Z_out(y; omega, V), g_out = d log Z_out / d omega (K) and d g_out / d omega (K*K).",
                 node_args=("_omega", "_y")))
    if out.values is not None:  # every label value at once: their law's pieces (normal CDFs) computed once
        at = [{out.label: v} for v in out.values]
        fns.append(F("output_laws", [("_omega", out.omega), ("_V", V_syms), p_arg],
                     [[out.log_z.subs(a) for a in at], [g.subs(a) for a in at for g in out.g],
                      [e.subs(a) for a in at for row in out.dg for e in row]],
                     "output_law at every label value of LABEL_VALUES: log Z_out (n), g_out (n*K), dg (n*K*K).",
                     node_args=("_omega",)))
    if out.forms:
        fns.append(F("output_switches", [p_arg],
                     [[e for row in out.forms for e in row], list(out.offsets), list(out.extra)],
                     "Where Z_out switches: forms (N_SWITCHES*K), offsets (N_SWITCHES), extra noise variance "
                     "(N_SWITCHES): the label changes with the sign of forms . h* + offsets."))
    if out.values is None:
        fns.append(F("label_law", [("_omega", out.omega), ("_V", V_syms), p_arg], [[out.mean, out.variance]],
                     "Mean and variance of a continuous label y given omega (its Z_out).", node_args=("_omega",)))
    h = list(d.model.h)
    fns.append(F("test_loss", [("_h", h), ("_y", [out.label]), p_arg], [d.test_loss],
                 "The declared loss at the student fields h and the label y.", node_args=("_h", "_y")))
    return fns


def _literal(x) -> str:
    """A float as Python source (infinities as ``float('inf')``)."""
    v = float(x)
    return repr(v) if abs(v) < float("inf") else f"float({str(v)!r})"


def _header(d: BayesDerivation, declaration) -> str:
    m, out, inp = d.model, d.output, d.input
    params = d.parameters
    domains = {s.name: (dom.low, dom.high) for s, dom in m.domains.items()}
    stamp = current_stamp(declaration, "bayes")
    support = (f"({_literal(inp.prior.support[0])}, {_literal(inp.prior.support[1])})" if inp.terms is None
               else "None")
    values = tuple(float(v) for v in out.values) if out.values is not None else None
    return f'''"""Generated by replica -- do not edit: the Bayes-optimal module of {m.name}.

Model: {m.name}: {m.description}
Prior: {inp.prior!r}; teacher fields per token K = {d.K}. Kernels (replica.codegen.bayes); the numerics
are replica.numeric.bayes.
"""
# {stamp.line()}
import numpy as np

from replica.numeric.bayes_model import {", ".join(HELPERS)}

MODEL = {m.name!r}
K = {d.K}
R = {m.r}
PARAMETERS = {tuple(s.name for s in params)!r}
DEFAULTS = {tuple(m.defaults[s] for s in params)!r}
DOMAINS = {domains!r}
CONSTRAINTS = {tuple((c.parameter, c.message, c.relation.rel_op) for c in m.constraints)!r}
PRIOR = {"mixture" if inp.terms is not None else "density"!r}
PRIOR_NAME = {repr(inp.prior)!r}
N_TERMS = {len(inp.terms) if inp.terms is not None else 0}
SUPPORT = {support}
N_KINKS = {len(inp.kinks)}
# label values (None: a continuous label, its law given omega from label_law)
LABEL_VALUES = {values!r}
N_SWITCHES = {len(out.forms)}
# parameters of a continuous label's noise variance: at 0 the label has no density
NOISE_PARAMETERS = {tuple(s.name for s in d.noise_parameters)!r}
'''


def generate_bayes_module(d: BayesDerivation, *, declaration: str | Path | None = None) -> str:
    """Source of the Bayes-optimal module of ``d`` (stamped with ``declaration``'s hash)."""
    if declaration is None:
        declaration = getattr(d.model, "declared_in", None)
    body = BayesBackend().section(bayes_functions(d))
    return _header(d, declaration) + "\n\n" + body


def write_bayes_module(d: BayesDerivation, path: str | Path, *, declaration: str | Path | None = None) -> Path:
    """Generate and write the module (atomically)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, generate_bayes_module(d, declaration=declaration))
