"""Tied attention on Gaussian-mixture tokens with correlated cluster labels (paper Appendix C.10).

Token ``l`` is drawn from cluster ``c_l in {a, b}``: ``x_l | c_l = c ~ N(mu_{lc}, sigma_{lc}^2 I)``
with ``mu_{lc} = mu_lc * u`` (``u`` a unit direction orthogonal to the encodings, entries
``+-1/sqrt(d)``); the labels are correlated, ``P(c_1 = c_2) = p_same`` with uniform marginals.
Defaults (:data:`SLOTS`): wide clusters ``a`` (sigma 0.5) and narrow ones ``b`` (0.35) with
means that differ between clusters and tokens, ``p_same = 0.8``.
Student, target, encodings (``p_1 = -p_2 = 1_d/sqrt(d)``) and penalty as in
:mod:`derivations.attention_tied`. The order parameters carry a slot index ``1a, 1b, 2a, 2b``
(token, cluster); the energetic average runs over the four label configurations
(docs/explanation/theory.md §8, docs/how-to/extensions.md). With equal clusters it is the paper's model.
"""
from __future__ import annotations

from replica import (L2, Domain, Model, TokenStatistics, fields, matrix_parameter, parameter, row_stochastic,
                     softmax_rows, teacher_fields)
from replica.applications.attention.paper import BRANCHES, PAPER_A, TRANSITION

#: default (sigma, mean amplitude) of every slot (token, cluster)
SLOTS = {"1a": (0.5, 0.8), "1b": (0.35, -0.4), "2a": (0.5, 0.4), "2b": (0.35, -0.8)}


def build(p_same: float = 0.8, name: str = "attention_clusters") -> Model:
    h, hs = fields(2, 1), teacher_fields(2, 1)
    omega = parameter("omega", r"\omega", "positionality of the target: the weight of its positional part $A$")
    lam = parameter("lam", r"\lambda", r"strength of the $\ell_2$ penalty")
    same = parameter("p_same", "p_{=}", "probability that the two tokens come from the same cluster")
    sig = {f"{l}{c}": parameter(f"sigma_{l}{c}", rf"\sigma_{{{l}{c}}}",
                                f"standard deviation of the entries of token {l} in cluster {c}")
           for l in (1, 2) for c in "ab"}
    mu = {f"{l}{c}": parameter(f"mu_{l}{c}", rf"\mu_{{{l}{c}}}",
                               rf"projection $\sqrt{{d}}\, e_i^\top \mu$ of the mean of cluster {c} of token {l}")
          for l in (1, 2) for c in "ab"}
    Amat = matrix_parameter("A", 2, 2, description="positional attention matrix of the target (row-stochastic)")
    data = TokenStatistics.mixture(
        variances=[[sig[f"{l}{c}"] ** 2 for c in "ab"] for l in (1, 2)],
        means=[[mu[f"{l}{c}"] for c in "ab"] for l in (1, 2)],
        positional=(1, -1),
        labels={(0, 0): same / 2, (1, 1): same / 2, (0, 1): (1 - same) / 2, (1, 0): (1 - same) / 2})
    return Model(
        name=name,
        description="tied dot-product attention, L=2, r=r_t=1, tokens from two Gaussian clusters with "
                    "correlated labels (App. C.10)",
        h=h, hstar=hs, student=softmax_rows(h * h.T),
        target=(1 - omega) * softmax_rows(hs * hs.T) + omega * Amat,
        data=data, regularizer=L2(lam),
        parameters={omega: 0.3, lam: 0.01, same: p_same, Amat: PAPER_A,
                    **{sig[k]: SLOTS[k][0] for k in sig}, **{mu[k]: SLOTS[k][1] for k in mu}},
        domains={omega: Domain(0, 1), lam: Domain(0, None), same: Domain(0, 1),
                 **{s: Domain(0, None) for s in sig.values()}},
        constraints=row_stochastic(Amat, "A"),
        branches=BRANCHES,
        transition=TRANSITION,
        baseline="linear",
    )


model = build()

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "attention_clusters", "--write"])
