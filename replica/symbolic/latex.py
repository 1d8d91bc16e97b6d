"""LaTeX export of a derivation: potentials and saddle-point equations.

:func:`latex_document` writes a standalone, compilable ``.tex`` file (amsmath and
breqn, which breaks long equations); :func:`markdown_document` writes the same
content as Markdown with ``$$`` blocks. Both are produced from the sympy objects of
:class:`~replica.symbolic.derivation.Derivation`, never typed by hand.

The energetic equations are shown in chain-rule form,
``dF/dx = sum_u (dF/du)(du/dx)``, with ``u`` the prox centres ``omega_l`` and the
teacher fields ``h*_l``: the factor ``dl/dh*`` stays abstract (it is long for
softmax attention and adds nothing to a reader), everything else is explicit.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import sympy as sp

from .channels import BivariateNormalCDF
from .data import CLUSTER_LETTERS
from .derivation import Derivation
from ..artifacts.freshness import current_stamp
from .observables import TEST_LOSS, StateObservable, TestObservable
from .potentials import GaussianMoreauEnvelope, prox_center_symbols
from .symbols import LATEX_NAMES, symbol



#: a label law's derivatives up to this many operations are written out (simplified) in the export;
#: larger ones (a three-class argmax's bivariate-orthant law: ~1e5 operations, and minutes of
#: sympy's simplify) are left to the reader, with the derivatives of the functions in the law
SIMPLIFY_OPS = 200
#: the derivatives the potentials use for a bivariate normal CDF (replica.symbolic.channels.BivariateNormalCDF)
PHI2_DERIVATIVES = (r"\partial_h \Phi_2(h, k; r) = \phi(h)\, \Phi\left(\frac{k - r h}{\sqrt{1 - r^2}}\right), \quad "
                    r"\partial_r \Phi_2(h, k; r) = \frac{e^{-(h^2 - 2 r h k + k^2) / (2 (1 - r^2))}}{2 \pi \sqrt{1 - r^2}}")


def _law_derivative(weight: sp.Expr, x: sp.Symbol) -> sp.Expr | None:
    """``d weight / dx`` simplified, or None where it has more than :data:`SIMPLIFY_OPS` operations."""
    expr = sp.diff(weight, x)
    return sp.simplify(expr) if sp.count_ops(expr) <= SIMPLIFY_OPS else None


def tex(expr, **kw) -> str:
    """LaTeX of a sympy expression with the toolkit's symbol spellings."""
    names = dict(LATEX_NAMES)
    return sp.latex(expr, symbol_names=names, **kw)


@dataclass
class Block:
    """Displayed equations (one or several) with an optional lead-in sentence."""

    text: str
    math: str | list[str]

    @property
    def equations(self) -> list[str]:
        """The block's equations as ``(lhs, rhs)`` LaTeX strings."""
        return [self.math] if isinstance(self.math, str) else list(self.math)


def _squeeze(M: sp.Matrix) -> sp.Expr | sp.Matrix:
    """A 1x1 matrix as its entry (scalar order parameters read better)."""
    return M[0, 0] if M.shape == (1, 1) else M


def _loss_derivative_symbol(hs: sp.Symbol) -> sp.Symbol:
    name = LATEX_NAMES.get(hs, sp.latex(hs))
    return symbol(f"dloss__{hs.name}", rf"\frac{{\partial \ell}}{{\partial {name}}}")


def chain_rule_gradient(d: Derivation, x: sp.Symbol) -> sp.Expr:
    """``dF/dx`` with ``dl/dh*`` left abstract (for display)."""
    env = d.energetic_potential
    m = d.model
    total = sp.Integer(0)
    quad = env.bracket - m.loss
    for u, law in env.intermediates.items():
        du = sp.diff(law, x)
        if du == 0:
            continue
        if u in set(m.hstar):
            dF = _loss_derivative_symbol(u) + sp.diff(quad, u)
        else:
            dF = sp.diff(env.bracket, u)
        total += dF * sp.simplify(du)
    total += sp.diff(quad, x)
    return total


def _cluster_blocks(m) -> list[Block]:
    """Slot statistics and the label law of a model with token clusters (THEORY §6)."""
    data = m.data
    out = [Block("Token clusters: token $\\ell$ is drawn from cluster $c_\\ell$, "
                 "$x_\\ell \\mid c_\\ell = c \\sim \\mathcal{N}(\\mu_{\\ell c}, \\Sigma_{\\ell c})$; "
                 "order parameters carry a slot index $s = (\\ell, c)$, written $1a, 1b, 2a, \\dots$ "
                 "(token, cluster). Slot statistics:",
                 [rf"\bar\rho_{{{lab}}} = {tex(data.rho_bar(s))}, \quad "
                  rf"\rho_{{{lab}}} = {tex(_squeeze(data.rho(s, m.r_t)))}, \quad "
                  rf"P(c_{{{data.slots[s][0] + 1}}} = {CLUSTER_LETTERS[data.slots[s][1]]}) = {tex(data.marginal(s))}"
                  for s, lab in enumerate(data.slot_labels)])]
    labs = ", ".join(data.slot_labels)
    atoms = [rf"\text{{weight }} {tex(a.weight)}: \quad (\gamma_{{s}})_{{s = {labs}}} = "
             rf"({', '.join(tex(g) for g in a.gamma)}), \quad (\pi_{{s}})_{{s = {labs}}} = "
             rf"({', '.join(tex(x) for x in a.pi)})" for a in data.atoms]
    out.append(Block("Spectral law of the slots: atoms of the eigenvalues $\\gamma_s$ of $\\Sigma_s$ and "
                     "the projections $\\pi_s = \\sqrt{d}\\, e_i^T(\\mu_s + p_\\ell)$ of the cluster means "
                     "plus encodings:", atoms))
    rows = [rf"P(c = ({', '.join(CLUSTER_LETTERS[c] for c in config)})) = {tex(prob)}"
            for config, prob, _ in data.configurations()]
    out.append(Block("Joint law of the cluster labels $c = (c_1, \\dots, c_L)$:", rows))
    views = [rf"x_{{{l + 1}}} = "
             + " + ".join(rf"e_{{{data.slot_label(s)}}}\, x_{{{data.slot_label(s)}}}" for s in data.token_slots(l))
             for l in range(m.L) if data.clusters[l] > 1]
    out.append(Block("In the loss and the energetic bracket every token parameter "
                     "$x \\in \\{q, V, m, \\theta, \\rho, \\bar\\rho\\}$ is that of the token's cluster, "
                     "written with one-hot label indicators:", views))
    return out


def blocks(d: Derivation) -> list[tuple[str, list[Block]]]:
    """The document as sections of equation blocks."""
    m = d.model
    env = d.energetic_potential
    sections: list[tuple[str, list[Block]]] = []
    # --- model
    model_blocks = []
    if m.student is not None:
        model_blocks.append(Block("Student score map:", rf"S(h) = {tex(m.student)}"))
        model_blocks.append(Block("Target map:", rf"T(h^{{*}}) = {tex(m.target)}"))
    if m.channel is not None:
        model_blocks.append(Block("Teacher channel (the label's law given the teacher fields enters the Gaussian "
                                  "measure, never the integrand):", m.channel.describe(tex)))
    model_blocks.append(Block("Per-sample loss of the fields (the $d \\to \\infty$ limit of the risk):",
                              rf"\ell(h, h^{{*}}) = {tex(m.loss)}"))
    w = sp.Matrix([symbol(f"w_{i + 1}", f"w_{{{i + 1}}}") for i in range(m.r)])
    model_blocks.append(Block("Regularizer of a weight row $w \\in \\mathbb{R}^{r}$:",
                              rf"r(w) = {tex(m.regularizer.expression(w))}"))
    if m.data.has_clusters:
        model_blocks += _cluster_blocks(m)
    for l in range(m.L if not m.data.has_clusters else 0):
        model_blocks.append(Block(
            f"Token {l + 1} statistics:",
            [rf"\bar\rho_{{{l + 1}}} = {tex(m.data.rho_bar(l))}",
             rf"\rho_{{{l + 1}}} = {tex(_squeeze(m.data.rho(l, m.r_t)))}"]))
    if m.reduction is not None and m.reduction.coefficients:
        parts = []
        for fam, c in m.reduction.coefficients.items():
            stem = {"q": "q", "V": "V", "m": "m", "theta": r"\theta"}[fam]
            coef = {1: "", -1: "-"}
            labels = m.data.slot_labels
            parts.append(", ".join(rf"{stem}_{{{labels[l]}}} = {coef.get(ci, str(ci))}{stem}"
                                   for l, ci in enumerate(c)))
        model_blocks.append(Block("Token symmetry (free order parameters without token index; "
                                  "conjugates aggregate accordingly):", parts))
    sections.append(("Model", model_blocks))
    # --- potentials
    pot = [Block("Trace potential:", rf"\Psi_t = {tex(d.trace_potential)}")]
    went = d.entropic_potential
    if isinstance(went, GaussianMoreauEnvelope):
        gw = ", ".join(tex(g) for g in went.gaussians)
        pot.append(Block("Entropic potential (Moreau envelope of the regularizer):",
                         rf"\Psi_w = -\mathbb{{E}}_{{{gw}}} \min_w \left[{tex(went.bracket)}\right]"))
        pot.append(Block("with", [rf"{tex(u)} = {tex(e)}" for u, e in went.intermediates.items()]))
        if getattr(went, "argmin", None):
            pot.append(Block("and the minimiser in closed form (the proximal map of $r$, found by sympy):",
                             [rf"\hat {tex(v)} = {tex(e)}" for v, e in zip(went.variables, went.argmin)]))
    else:
        pot.append(Block("Entropic potential (closed form, Gaussian teacher average done exactly):",
                         rf"\Psi_w = {tex(d.entropic_potential)}"))
    gs = ", ".join(tex(g) for g in env.gaussians)
    if env.discrete:
        gs = r"c \sim P, " + gs
        pot.append(Block("Energetic potential, a Moreau envelope of the loss averaged over the label "
                         "configurations $c$ (the indicators $e_{\\ell c}$ one-hot, "
                         "$e_{\\ell c} = 1$ iff $c_\\ell = c$):",
                         [rf"\Psi_y = -\mathbb{{E}}_{{{gs}}} \min_{{h}} F(h; \omega, h^{{*}}, V)",
                          rf"F(h; \omega, h^{{*}}, V) = {tex(env.bracket)}"]))
    elif env.weight is not None:
        values = ", ".join(str(v) for v in env.label_values)
        y = tex(env.label)
        pot.append(Block("Energetic potential, a Moreau envelope of the loss at a fixed label, weighted by the "
                         f"label's law $W$ given the student's Gaussians (the $Z_{{\\rm out}}$ form; ${y}$ "
                         f"takes the values ${values}$):",
                         [rf"\Psi_y = -\mathbb{{E}}_{{{gs}}} \sum_{{{y}}} W({y} \mid {gs}) \min_{{h}} F(h; \omega, {y}, V)",
                          rf"W({y} \mid {gs}) = {tex(env.weight)}",
                          rf"F(h; \omega, {y}, V) = {tex(env.bracket)}"]))
    else:
        pot.append(Block("Energetic potential, a Moreau envelope of the loss:",
                         [rf"\Psi_y = -\mathbb{{E}}_{{{gs}}} \min_{{h}} F(h; \omega, h^{{*}}, V)",
                          rf"F(h; \omega, h^{{*}}, V) = {tex(env.bracket)}"]))
    if env.pieces is not None:
        pot.append(Block("The loss is piecewise smooth in $h$, with breakpoints below; the minimum over $h$ is "
                         "found exactly (stationary points of every piece and the breakpoints):",
                         [rf"h \in \left\{{{', '.join(tex(b) for b in env.pieces.breakpoints)}\right\}}"]))
    laws = [rf"{tex(u)} = {tex(e)}" for u, e in env.intermediates.items()]
    pot.append(Block("with the centres and teacher fields (Cholesky form of $q^{1/2}$), all Gaussians "
                     "standard and independent:", laws))
    pot.append(Block("Free entropy (training loss $e_t = -\\Phi$):",
                     r"\Phi = \operatorname{extr} \left[ \Psi_t + \Psi_w + \alpha \Psi_y \right]"))
    sections.append(("Potentials", pot))
    # --- saddle point
    sp_eqs = d.saddle_point
    ent = [Block("", rf"{tex(eq.lhs)} = {tex(eq.rhs)}") for eq in sp_eqs.entropic]
    if sp_eqs.entropic_gradient:
        ent.append(Block("where, by the envelope theorem ($\\hat w$ the minimiser of the entropic bracket $B$):",
                         r"\partial_{\hat x} \Psi_w = -\mathbb{E}\left[ \partial_{\hat x} B(w) \big|_{w = \hat w} \right]"))
        for s_, e in zip(d.conjugate_symbols, sp_eqs.entropic_gradient.values()):
            ent.append(Block("", rf"\partial_{{{tex(s_)}}} B = {tex(e)}"))
    sections.append(("Saddle-point equations: entropic side", ent))
    en = [Block("", rf"{tex(eq.lhs)} = {tex(eq.rhs)}") for eq in sp_eqs.energetic]
    if env.weight is not None:
        y = tex(env.label)
        en.append(Block("where, by the envelope theorem ($\\hat h$ the global minimiser of $F$ at the label) and "
                        "differentiating the label's law, never the label:",
                        rf"\partial_x \Psi_y = -\mathbb{{E}} \sum_{{{y}}} \left[ \partial_x W \, F(\hat h; \omega, "
                        rf"{y}, V) + W \, \partial_x F(h; \omega, {y}, V) \big|_{{h = \hat h}} \right]"))
        derivatives = {x: _law_derivative(env.weight, x) for x in d.order_symbols}
        if any(v is None for v in derivatives.values()):
            phi2 = env.weight.has(BivariateNormalCDF)
            en.append(Block("The derivatives of the label's law $W$ are too long to print; they follow from $W$ "
                            + ("above with (symmetrically in $k$)" if phi2 else "above"),
                            PHI2_DERIVATIVES if phi2 else r"\partial_x W = \partial_x \left(W \text{ above}\right)"))
        for x, dW in derivatives.items():
            lines = [] if dW is None else [rf"\partial_{{{tex(x)}}} W = {tex(dW)}"]
            en.append(Block("", lines + [rf"\partial_{{{tex(x)}}} F = {tex(chain_rule_gradient(d, x))}"]))
    else:
        en.append(Block("where, by the envelope theorem ($\\hat h$ the global minimiser of $F$):",
                        r"\partial_x \Psi_y = -\mathbb{E}\left[ \partial_x F(h; \omega, h^{*}, V) "
                        r"\big|_{h = \hat h} \right]"))
        for x in d.order_symbols:
            en.append(Block("", rf"\partial_{{{tex(x)}}} F = {tex(chain_rule_gradient(d, x))}"))
    en.append(Block("Prox convention: $\\hat h$ above is the global minimiser of $F$, its lowest minimum (the theory of "
                    "the global minimiser of the empirical risk: the global convention, the default). Under the local "
                    "convention the same equations, $\\Psi_y$ and $e_t = -\\Phi$ are evaluated at the minimum reached "
                    "by descent from $h = 0$ instead, along the modified-Newton flow",
                    r"\hat h_{\mathrm{loc}} = \lim_{t \to \infty} h(t), \qquad \dot h = -\left|\nabla_h^2 F\right|^{-1} "
                    r"\nabla_h F, \qquad h(0) = 0"))
    sections.append(("Saddle-point equations: energetic side", en))
    sections.append(("Observables", _observable_blocks(m)))
    return sections


def _observable_blocks(m) -> list[Block]:
    """Every declared observable (:mod:`replica.symbolic.observables`) and the training loss."""
    out = []
    for o in m.observables:
        if isinstance(o, TestObservable):
            if o.name == TEST_LOSS and sp.sympify(o.expr) == m.loss:
                out.append(Block("Test error (no proximal step; $h_\\ell = \\omega_\\ell$ has the law of the test "
                                 "fields):", r"\varepsilon_g = \mathbb{E}\, \ell(\omega, h^{*})"))
                continue
            body = tex(sp.sympify(o.expr).subs(dict(zip(m.h, prox_center_symbols(m)))))
            out.append(Block(f"{o.description or o.name} (test point, $h_\\ell = \\omega_\\ell$):",
                             rf"{o.tex_name} = \mathbb{{E}}\left[{body}\right]"))
        elif isinstance(o, StateObservable):
            out.append(Block(f"{o.description or o.name} (a function of the order parameters at the fixed point):",
                             rf"{o.tex_name} = {tex(m.state_expression(o.expr))}"))
        else:
            out.append(Block(f"{o.description or o.name} (at the entropic minimiser $\\hat w$, summed over the "
                             "atoms of the spectral law):",
                             rf"{o.tex_name} = \mathbb{{E}}\left[{tex(o.expr)}\right]_{{w = \hat w}}"))
    out.append(Block("Training loss:", r"e_t = -\Phi"))
    return out


def _stamp(d: Derivation) -> str:
    """The freshness stamp of an export (:mod:`replica.artifacts.freshness`)."""
    return current_stamp(getattr(d.model, "declared_in", None), "export").line()


def latex_document(d: Derivation) -> str:
    """A standalone LaTeX document of the derivation."""
    out = [f"% {_stamp(d)}",
           r"\documentclass[10pt]{article}",
           r"\usepackage[margin=2cm]{geometry}",
           r"\usepackage{amsmath,amssymb}",
           r"\usepackage{breqn}",
           r"\setlength{\parindent}{0pt}",
           rf"\title{{Replica-symmetric saddle point: \texttt{{{d.model.name.replace('_', chr(92) + '_')}}}}}",
           r"\date{Generated by replica}",
           r"\begin{document}", r"\maketitle"]
    if d.model.description:
        out.append(d.model.description.replace("_", r"\_").replace("^", r"\^{}") + "\n")
    for title, bl in blocks(d):
        out.append(rf"\section*{{{title}}}")
        for b in bl:
            if b.text:
                out.append(b.text + "\n")
            for eq in b.equations:
                out.append(r"\begin{dmath*}" + "\n" + eq + "\n" + r"\end{dmath*}")
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"


def markdown_document(d: Derivation) -> str:
    """The same content as Markdown with ``$$`` display blocks."""
    out = [f"<!-- {_stamp(d)} -->", f"# Replica-symmetric saddle point: `{d.model.name}`", ""]
    if d.model.description:
        out += [d.model.description, ""]
    for title, bl in blocks(d):
        out += [f"## {title}", ""]
        for b in bl:
            if b.text:
                out += [b.text, ""]
            for eq in b.equations:
                out += ["$$", eq, "$$", ""]
    return "\n".join(out)


def write_latex(d: Derivation, tex_path: str | Path | None = None, md_path: str | Path | None = None
                ) -> list[Path]:
    """Write the ``.tex`` and/or ``.md`` export; returns the written paths."""
    from ..artifacts.outputs import atomic_write_text

    written = []
    if tex_path is not None:
        written.append(atomic_write_text(tex_path, latex_document(d)))
    if md_path is not None:
        written.append(atomic_write_text(md_path, markdown_document(d)))
    return written
