"""LaTeX and Markdown of a model's Bayes-optimal free entropy and saddle point (``replica derive MODEL --bayes``).

The document states the prior and the label law as declared, ``Z_0`` and ``Z_out`` in the closed forms the
derivation found (:class:`~replica.symbolic.bayes.BayesDerivation`), the posterior-mean denoisers ``f_a``
and ``g_out``, the free entropy and its saddle point in the ``f_a``/``g_out`` form, the Nishimori
identities and what is reported. Same layout as the empirical-risk export (:mod:`replica.symbolic.latex`).
"""
from __future__ import annotations

from pathlib import Path

import sympy as sp

from ..artifacts.freshness import current_stamp
from .bayes import BayesDerivation
from .latex import Eq, Text, latex_text, markdown_text, tex, write_documents


def _sections(d: BayesDerivation) -> list[tuple[str, list]]:
    out, inp, K = d.output, d.input, d.K
    vec = K > 1
    w = r"w \in \mathbb{R}^{%d}" % K if vec else r"w \in \mathbb{R}"
    model = [
        Text(rf"Data: $n = \alpha d$ samples $x \sim \mathcal{{N}}(0, I_d)$. Teacher weights $W^* \in "
             rf"\mathbb{{R}}^{{d \times {K}}}$ with i.i.d. entries of law $P_0$; the label depends on the teacher "
             rf"field{'s' if vec else ''} $h^* = W^{{*\top}} x/\sqrt{{d}}$ through its law $P_\mathrm{{out}}(y \mid h^*)$. "
             "The Bayes-optimal student knows both: its estimator is the posterior mean."),
        Text("Prior of each entry of a teacher weight row:"), Eq("", [inp.prior.describe(tex)], rel=""),
        Text("Label law:"), Eq("", [out.description], rel=""),
    ]
    if d.rho is not None:
        model.append(Eq(r"\rho", [rf"\mathbb{{E}}_{{P_0}}\, w^2 = {tex(d.rho)}"]))
    q, qh = (r"q", r"\hat q") if not vec else (r"Q", r"\hat Q")
    free = [
        Text("The replica-symmetric free entropy on the Nishimori line (overlap "
             rf"${q} = \mathbb{{E}}\, \hat w\, w^{{*\top}}$ of the posterior mean with the teacher, one conjugate "
             rf"${qh}$):"),
        Eq(r"\Phi", [rf"\operatorname{{extr}}_{{{q}, {qh}}} \left[ -\tfrac12 \operatorname{{tr}}({q} {qh}) + "
                     rf"\psi_{{P_0}}({qh}) + \alpha\, \Psi_\mathrm{{out}}({q}) \right]"]),
        Eq(r"\psi_{P_0}(A)", [r"\mathbb{E}_{w^* \sim P_0,\, \xi \sim \mathcal{N}(0, I)} \log Z_0\left(A w^* + "
                              r"A^{1/2} \xi,\, A\right)"]),
        Eq(r"\Psi_\mathrm{out}(%s)" % q,
           [(r"\mathbb{E}_{\xi} \sum_{y} " if out.values is not None else r"\mathbb{E}_{\xi} \int dy\, ")
            + rf"Z_\mathrm{{out}}(y; \omega, V) \log Z_\mathrm{{out}}(y; \omega, V), \quad \omega = {q}^{{1/2}} \xi, "
              rf"\quad V = \rho - {q}"]),
        Eq(r"Z_0(B, A)", [rf"\int dP_0({w})\, e^{{B^\top w - \frac12 w^\top A w}}"]),
        Eq(r"Z_\mathrm{out}(y; \omega, V)", [r"\mathbb{E}_{h^* \sim \mathcal{N}(\omega, V)}\, "
                                             r"P_\mathrm{out}(y \mid h^*)"]),
    ]
    closed = []
    if inp.log_z0 is not None and K == 1:
        closed.append(Eq(r"\log Z_0(B, A)", [tex(sp.simplify(inp.log_z0).subs(inp.A[0, 0], sp.Symbol("A")))]))
        closed.append(Eq(r"f_a(B, A) = \partial_B \log Z_0", [tex(inp.f_a[0].subs(inp.A[0, 0], sp.Symbol("A")))]))
    elif inp.log_z0 is not None:
        closed.append(Text(rf"$\log Z_0$ is the log-sum-exp of {len(inp.terms)} terms quadratic in $B$ (a Gaussian "
                           "integral per choice of a mixture component of every entry)."))
    else:
        closed.append(Text(r"$Z_0$ has no closed form: it is integrated on a composite Gauss-Legendre rule of the "
                           "density, with panel boundaries where the density is not smooth."))
    closed.append(Eq(r"Z_\mathrm{out}(y; \omega, V)", [tex(out.Z)]))
    if K == 1:
        closed.append(Eq(r"g_\mathrm{out}(y, \omega, V) = \partial_\omega \log Z_\mathrm{out}",
                         [tex(sp.simplify(out.g[0].subs(out.log_z, sp.log(out.Z)))) if sp.count_ops(out.g[0]) < 80
                          else tex(out.g[0])]))
    else:
        closed.append(Text(r"$g_\mathrm{out} = \nabla_\omega \log Z_\mathrm{out}$, differentiated by sympy."))
    saddle = [
        Text("Stationarity, written with the posterior-mean denoisers (the Nishimori identities turn the "
             r"derivatives of $\psi_{P_0}$ and $\Psi_\mathrm{out}$ into these squares):"),
        Eq(q, [rf"\mathbb{{E}}_{{w^*, \xi}}\, f_a f_a^\top\left({qh} w^* + {qh}^{{1/2}} \xi,\, {qh}\right)"]),
        Eq(qh, [r"\alpha\, \mathbb{E}_{\xi} " + (r"\sum_y " if out.values is not None else r"\int dy\, ")
                + rf"Z_\mathrm{{out}}(y; \omega, V)\, g_\mathrm{{out}} g_\mathrm{{out}}^\top(y, \omega, V), \quad "
                  rf"\omega = {q}^{{1/2}}\xi,\ V = \rho - {q}"]),
        Text("Nishimori identities at the fixed point: the overlap with the teacher equals the self-overlap, "
             rf"$\mathbb{{E}}\, w^* f_a^\top = \mathbb{{E}}\, f_a f_a^\top = {q}$; the posterior covariance is "
             rf"$\mathbb{{E}}\, \partial_B f_a = \rho - {q}$; and "
             r"$\mathbb{E}\, Z_\mathrm{out} g_\mathrm{out} g_\mathrm{out}^\top = -\mathbb{E}\, Z_\mathrm{out} "
             r"\partial_\omega g_\mathrm{out}$."),
    ]
    report = [
        Eq(r"\mathrm{mmse}", [rf"\rho - {q}"]),
        Eq(r"\epsilon_g", [r"\mathbb{E}_\omega \min_h \mathbb{E}\left[\ell(h, y) \mid \omega\right]"
                           r"\quad \text{(the Bayes risk of the declared loss } \ell \text{)}"]),
    ]
    if out.values is not None:
        report.append(Eq(r"\epsilon_\mathrm{class}", [r"1 - \mathbb{E}_\omega \max_y Z_\mathrm{out}(y; \omega, V)"]))
    return [("Model", model), ("Free entropy", free), ("Closed forms", closed), ("Saddle point", saddle),
            ("Reported", report)]


def _stamp(d: BayesDerivation) -> str:
    return current_stamp(getattr(d.model, "declared_in", None), "bayes").line()


def latex_document(d: BayesDerivation) -> str:
    """A standalone LaTeX document of the Bayes-optimal derivation."""
    return latex_text("Bayes-optimal inference", d.model.name, _stamp(d), _sections(d))


def markdown_document(d: BayesDerivation) -> str:
    """The same content as Markdown with ``$$`` display blocks."""
    return markdown_text("Bayes-optimal inference", d.model.name, _stamp(d), _sections(d))


def write_bayes_latex(d: BayesDerivation, tex_path: str | Path | None = None, md_path: str | Path | None = None
                      ) -> list[Path]:
    """Write the ``.tex`` and/or ``.md`` export of the Bayes-optimal derivation; returns the written paths."""
    return write_documents(tex_path, lambda: latex_document(d), md_path, lambda: markdown_document(d))
