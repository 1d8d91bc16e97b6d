"""Untied key/query dot-product attention (paper Appendix C.10, docs/explanation/theory.md §8).

``W = [Q K]``: the fields ``h in R^{L x 2r}`` are ``(h^Q, h^K)``, ``S(h) = softmax_row(h^Q h^K^T)``,
penalty ``lambda_Q/2 |Q|^2 + lambda_K/2 |K|^2`` (``L2([lam_Q, lam_K])``); target, data and
branches as in :mod:`derivations.attention_tied`. The order parameters are ``2r x 2r`` matrices
(``q_12`` is the query-key overlap). ``pin_key=True`` substitutes ``h^K := h^Q`` (the constraint
``K = Q``): then ``lambda_Q + lambda_K`` plays the role of the tied ``lambda`` (see
tests/test_attention_variants.py).
"""
from __future__ import annotations

from replica import (L2, Domain, Model, TokenReduction, TokenStatistics, fields, matrix_parameter,
                     parameter, row_stochastic, softmax_rows, teacher_fields)
from replica.applications.attention.paper import BRANCHES, PAPER_A, TRANSITION


def build(L: int = 2, r: int = 1, r_t: int = 1, reduced: bool = True, A=None, pin_key: bool = False,
          name: str = "attention_untied") -> Model:
    hQ, hK, hs = fields(L, r, "hQ", "h^Q"), fields(L, r, "hK", "h^K"), teacher_fields(L, r_t)
    omega = parameter("omega", r"\omega", "positionality of the target: the weight of its positional part $A$")
    sigma = parameter("sigma", r"\sigma", r"standard deviation of the token entries ($\Sigma_a = \sigma^2 I$)")
    lam_Q = parameter("lam_Q", r"\lambda_Q", r"strength of the $\ell_2$ penalty on the query weights")
    lam_K = parameter("lam_K", r"\lambda_K", r"strength of the $\ell_2$ penalty on the key weights")
    Amat = matrix_parameter("A", L, L, description="positional attention matrix of the target (row-stochastic)")
    S = softmax_rows(hQ * hK.T)
    if pin_key:
        S, h, reg = S.subs(dict(zip(hK, hQ))), hQ, L2(lam_Q + lam_K)
    else:
        h, reg = hQ.row_join(hK), L2([lam_Q] * r + [lam_K] * r)
    return Model(
        name=name,
        description=f"untied key/query attention, L={L}, r={r}, r_t={r_t}"
                    + (", K pinned to Q" if pin_key else ""),
        h=h, hstar=hs, student=S,
        target=(1 - omega) * softmax_rows(hs * hs.T) + omega * Amat,
        data=TokenStatistics.isotropic(L, sigma ** 2, positional=[(-1) ** l for l in range(L)]),
        regularizer=reg,
        parameters={omega: 0.3, sigma: 0.5, lam_Q: 0.01, lam_K: 0.01,
                    Amat: A if A is not None else PAPER_A},
        domains={omega: Domain(0, 1), sigma: Domain(0, None), lam_Q: Domain(0, None), lam_K: Domain(0, None)},
        constraints=row_stochastic(Amat, "A"),
        reduction=TokenReduction({"q": [1, 1], "V": [1, 1], "theta": [1, 1], "m": [1, -1]}) if reduced else None,
        branches=BRANCHES,
        transition=TRANSITION,
        baseline="linear",
    )


model = build()

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "attention_untied", "--write"])
