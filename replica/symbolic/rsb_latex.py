"""LaTeX and Markdown of a zero-temperature 1RSB derivation (``replica derive MODEL --rsb 1 --latex FILE``).

Prints the sympy objects of :class:`~replica.symbolic.rsb.RSBDerivation` -- the trace and entropic potentials,
the nested energetic potential with its bracket and the laws of the centres and the teacher, the
stationarity equations the solver runs, the complexity that fixes the Parisi parameter -- never text
typed per model. The symbols are those of :mod:`replica.symbolic.latex` (the declaration's spellings).
"""
from __future__ import annotations

from .latex import tex
from .rsb import NestedEnvelope, RSBDerivation


def _blocks(d: RSBDerivation) -> list[tuple[str, list]]:
    """``(section, items)``; an item is a string (text) or a list of ``(lhs, rhs)`` rows (one display)."""
    m = d.model
    env = d.energetic_potential.envelope
    pm = tex(d.parisi)
    model = [
        rf"Model \texttt{{{_escape(m.name)}}}: {_escape(m.description)}. Zero-temperature one-step replica-symmetry breaking "
        rf"(1RSB) of the empirical risk minimiser: intra-state overlap $q_1$, inter-state overlap $q_0$, "
        rf"$\delta q = \beta (Q - q_1)$ and the Parisi parameter ${pm} = \beta x$ kept finite as "
        rf"$\beta \to \infty$, with their conjugates.",
        [(r"\ell(h, h^{*})", tex(m.loss))],
    ]
    pot: list = [[(r"\Phi", r"\Psi_t + \Psi_w + \alpha \Psi_y")], [(r"\Psi_t", tex(d.trace_potential))]]
    went = d.entropic_potential
    if isinstance(went, NestedEnvelope):
        wenv = went.envelope
        pot.append("The entropic potential is a nested Gaussian average of the penalty's Moreau envelope:")
        pot.append([(r"\Psi_w", rf"\frac{{1}}{{{pm}}}\, \mathbb{{E}}_{{\mathrm{{out}}}} \log \mathbb{{E}}_{{\mathrm{{in}}}}"
                                rf" e^{{-{pm}\, \min_w B(w)}}"),
                    (r"B(w)", tex(wenv.bracket))] + [(tex(k), tex(v)) for k, v in wenv.intermediates.items()])
    else:
        pot.append([(r"\Psi_w", tex(went))])
    outer = ", ".join(tex(g) for g in d.energetic_potential.outer)
    inner = ", ".join(tex(g) for g in d.energetic_potential.inner)
    pot.append(rf"The energetic potential averages over the outer Gaussians ${outer}$ the log of an inner "
               rf"average over ${inner}$ (all standard normal) of the tilted Moreau envelope of the loss:")
    rows = [(r"\Psi_y", rf"\frac{{1}}{{{pm}}}\, \mathbb{{E}}_{{{outer}}} \log \mathbb{{E}}_{{{inner}}}\, "
                        rf"e^{{-{pm} M}}, \quad M = \min_h F(h)"),
            (r"F(h)", tex(env.bracket))]
    rows += [(tex(k), tex(v)) for k, v in env.intermediates.items()]
    pot.append(rows)
    if env.weight is not None:
        pot.append("With a teacher channel every outer node carries the label law (summed over the labels):")
        pot.append([(r"W", tex(env.weight))])
    sp_ = d.saddle_point
    sad: list = [
        r"By the envelope theorem the gradients are averages of the bracket's derivatives at its global "
        r"minimiser $\hat h$ under the tilted inner measure "
        rf"$\langle \cdot \rangle = \mathbb{{E}}_{{{inner}}}[\,\cdot\, e^{{-{pm} M}}] / "
        rf"\mathbb{{E}}_{{{inner}}} e^{{-{pm} M}}$:",
        [(r"\partial_x \Psi_y", rf"-\mathbb{{E}}_{{{outer}}} \left\langle \partial_x F(\hat h) \right\rangle"),
         (rf"\partial_{{{pm}}} \Psi_y", rf"-\frac{{1}}{{{pm}^2}} \mathbb{{E}} \log \mathbb{{E}}\, e^{{-{pm} M}} "
                                        rf"- \frac{{1}}{{{pm}}} \mathbb{{E}} \langle M \rangle")],
        "Order parameters from the conjugates:",
        [(tex(eq.lhs), tex(eq.rhs)) for eq in sp_.entropic],
        "Conjugates from the energetic side:",
        [(tex(eq.lhs), tex(eq.rhs)) for eq in sp_.energetic],
        rf"The Parisi parameter is fixed where the complexity $\Sigma = -{pm}^2\, \partial_{{{pm}}} \Phi$ vanishes; "
        r"the training loss (the ground-state energy) is then $e_t = -\Phi$:",
        [(r"\Sigma", tex(sp_.complexity))],
        r"At $q_1 = q_0$ (and $\hat q_1 = \hat q_0$) every term reduces to the replica-symmetric one with "
        r"$q = q_1$, $V = \delta q$, whatever the Parisi parameter.",
    ]
    obs = [r"The test error is the replica-symmetric formula at $q = q_1$ (the minimiser's norm): "
           r"$\varepsilon_g = \mathbb{E}\, \ell(\omega, h^{*})$ with $(\omega - m, h^{*})$ Gaussian of covariance "
           r"$\begin{pmatrix} q_1 & \theta \\ \theta & \rho \end{pmatrix}$."]
    return [("Model", model), ("Potentials", pot), ("Saddle-point equations", sad), ("Observables", obs)]


def _escape(text: str) -> str:
    """Text for a LaTeX paragraph (the characters a model's name or description may hold)."""
    table = {"\\": r"\textbackslash{}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#", "$": r"\$", "{": r"\{",
             "}": r"\}", "|": r"$|$", "*": r"$^*$"}
    return "".join(table.get(c, c) for c in text)


def latex_document(d: RSBDerivation) -> str:
    """A standalone LaTeX document (article, amsmath and amssymb)."""
    out = [r"\documentclass[10pt]{article}", r"\usepackage[margin=2cm]{geometry}", r"\usepackage{amsmath,amssymb}",
           r"\setlength{\parindent}{0pt}",
           rf"\title{{Zero-temperature 1RSB saddle point: \texttt{{{_escape(d.model.name)}}}}}",
           r"\date{Generated by replica}", r"\begin{document}", r"\maketitle"]
    for title, items in _blocks(d):
        out.append(rf"\section{{{title}}}")
        for it in items:
            if isinstance(it, str):
                out.append(it + "\n")
            else:
                out.append(r"\begin{align}" + "\n" + (r" \\" + "\n").join(f"{a} &= {b}" for a, b in it)
                           + "\n" + r"\end{align}")
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"


def markdown_document(d: RSBDerivation) -> str:
    """The same content as Markdown with ``$$`` blocks."""
    out = [f"# Zero-temperature 1RSB saddle point: `{d.model.name}`", ""]
    for title, items in _blocks(d):
        out += [f"## {title}", ""]
        for it in items:
            if isinstance(it, str):
                out += [it, ""]
            else:
                out += ["$$", r"\begin{aligned}", (r" \\" + "\n").join(f"{a} &= {b}" for a, b in it),
                        r"\end{aligned}", "$$", ""]
    return "\n".join(out)
