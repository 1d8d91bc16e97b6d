"""The paper's model: tied low-rank dot-product attention on a mixed semantic/positional target.

docs/explanation/theory.md §1: ``S(h) = softmax_row(h h^T)``, ``T(h*) = (1 - omega) softmax_row(h* h*^T) + omega A``,
tokens ``x_l ~ N(0, sigma^2 I)``, encodings ``p_1 = -p_2 = 1_d / sqrt(d)``, l2 penalty ``lambda``.
``build(L, r, r_t)`` declares the general instance; ``model`` is the paper's (``L = 2``,
``r = r_t = 1``), reduced by the token symmetry of docs/explanation/theory.md §6 (shared ``q, V, theta``;
``m_2 = -m_1``).

Run ``python derivations/attention_tied.py`` to print the saddle-point equations and
write ``attention_tied.tex`` / ``attention_tied.md`` next to this file.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from replica import (L2, Domain, ElasticNet, Model, TokenReduction, TokenStatistics, fields, matrix_parameter,
                     parameter, row_stochastic, softmax_rows, teacher_fields)
from replica.applications.attention.paper import BRANCHES, PAPER_A, TRANSITION


def build(L: int = 2, r: int = 1, r_t: int = 1, reduced: bool = True, A=None,
          positional=None, name: str = "attention_tied", penalty: str = "l2", unit_symmetry: bool | None = False
          ) -> Model:
    """Tied dot-product attention with ``L`` tokens, student rank ``r``, teacher rank ``r_t``.

    ``reduced`` applies the two-token symmetry of docs/explanation/theory.md §6 (only valid for ``L = 2``
    with ``p_2 = -p_1``). ``positional`` gives the projections ``pi_l`` (default
    alternating signs ``+1, -1, +1, ...``). ``penalty`` is ``"l2"`` (``lambda/2 |w|^2``)
    or ``"elastic_net"`` (``lam1 |w|_1 + lam2/2 |w|^2``). ``unit_symmetry``: as
    :class:`replica.Model`; a rank-``r`` student's columns are exchangeable, and the attention studies
    compare full matrices (default ``False``; ``None`` derives the unit-symmetric ansatz).
    """
    h, hs = fields(L, r), teacher_fields(L, r_t)
    omega = parameter("omega", r"\omega", "positionality of the target: the weight of its positional part $A$")
    sigma = parameter("sigma", r"\sigma", "standard deviation of the token entries ($\\Sigma_a = \\sigma^2 I$)")
    if penalty == "l2":
        lam = parameter("lam", r"\lambda", "strength of the $\\ell_2$ penalty")
        regularizer, reg_params = L2(lam), {lam: 0.01}
    elif penalty == "elastic_net":
        lam1 = parameter("lam1", r"\lambda_1", r"strength of the $\ell_1$ penalty")
        lam2 = parameter("lam2", r"\lambda_2", r"strength of the $\ell_2$ penalty")
        regularizer, reg_params = ElasticNet(lam1, lam2, r), {lam1: 0.001, lam2: 0.01}
    else:
        raise ValueError(f"penalty must be 'l2' or 'elastic_net', got {penalty!r}")
    Amat = matrix_parameter("A", L, L, description="positional attention matrix of the target (row-stochastic)")
    A_default = np.asarray(A if A is not None else (PAPER_A if L == 2 else np.full((L, L), 1.0 / L)))
    pis = positional if positional is not None else [(-1) ** l for l in range(L)]
    reduction = None
    if reduced:
        if L != 2 or list(pis) != [1, -1]:
            raise ValueError("the token reduction of docs/explanation/theory.md §6 needs L = 2 and p_2 = -p_1")
        reduction = TokenReduction({"q": [1, 1], "V": [1, 1], "theta": [1, 1], "m": [1, -1]})
    return Model(
        name=name,
        description=f"tied dot-product attention, L={L}, r={r}, r_t={r_t} (Cui et al. 2024)",
        h=h, hstar=hs,
        student=softmax_rows(h * h.T),
        target=(1 - omega) * softmax_rows(hs * hs.T) + omega * Amat,
        data=TokenStatistics.isotropic(L, sigma ** 2, positional=pis),
        regularizer=regularizer,
        parameters={omega: 0.3, sigma: 0.5, **reg_params, Amat: A_default},
        domains={omega: Domain(0, 1), sigma: Domain(0, None), **{s: Domain(0, None) for s in reg_params}},
        constraints=row_stochastic(Amat, "A"),
        reduction=reduction,
        branches=BRANCHES,
        transition=TRANSITION,
        baseline="linear",
        unit_symmetry=unit_symmetry,
    )


model = build()

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "attention_tied", "--write"])
