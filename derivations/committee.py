"""A soft committee machine: ``K`` tanh hidden units, square loss, l2 penalty, a ``K``-unit teacher.

``L = 1`` token ``x ~ N(0, I_d)``; student fields ``h_k = w_k . x / sqrt(d)`` (``W in R^{d x K}``),
output ``S(h) = sum_k tanh(h_k) / sqrt(K)``; the teacher is the same architecture,
``T(h*) = sum_k tanh(h*_k) / sqrt(K)``; loss ``(T - S)^2 / 2`` summed over samples and penalty
``lam/2 |W|^2``. The loss and the penalty cannot tell the hidden units apart, nor the teacher's:
the toolkit detects it and derives the model in the unit-symmetric ansatz
(:mod:`replica.symbolic.permutations`) with two branches, ``specialised`` (student unit ``k`` learns
teacher unit ``k``: ``theta`` has a diagonal ``theta_1_11`` and an off-diagonal ``theta_1_12``) and
``unspecialised`` (every unit overlaps every teacher unit alike), and ``replica phase`` reports the
specialisation threshold ``alpha_spec`` (docs/how-to/committees.md). ``build(K)`` declares any
number of units; ``model`` is the two-unit committee.
"""
from __future__ import annotations

import sympy as sp

from replica import L2, Domain, Model, TokenStatistics, fields, parameter, teacher_fields


def build(K: int = 2, K_teacher: int | None = None, name: str | None = None,
          unit_symmetry: bool | None = None) -> Model:
    """A ``K``-unit soft committee learning a ``K_teacher``-unit one (default ``K``); ``unit_symmetry``
    as :class:`replica.Model` (``False``: the full matrices)."""
    Kt = K if K_teacher is None else K_teacher
    h, hs = fields(1, K), teacher_fields(1, Kt)
    lam = parameter("lam", r"\lambda", "strength of the $\\ell_2$ penalty")
    student = sp.Add(*[sp.tanh(h[0, k]) for k in range(K)]) / sp.sqrt(K)
    teacher = sp.Add(*[sp.tanh(hs[0, k]) for k in range(Kt)]) / sp.sqrt(Kt)
    # (T - S)^2 / 2, written as (sum_k tanh h*_k - tanh h_k)^2 / (2K) when K = K_t (a shorter export)
    loss = (sp.Add(*[sp.tanh(hs[0, k]) - sp.tanh(h[0, k]) for k in range(K)]) ** 2 / (2 * K) if K == Kt
            else sp.Rational(1, 2) * (teacher - student) ** 2)
    return Model(
        name=name or ("committee" if K == 2 and Kt == 2 else f"committee_{K}_{Kt}"),
        description=f"soft committee: {K} tanh units learning a {Kt}-unit tanh committee, square loss, l2 penalty",
        h=h, hstar=hs,
        loss=loss,
        data=TokenStatistics.isotropic(1, 1),
        regularizer=L2(lam),
        parameters={lam: 0.1},
        domains={lam: Domain(0, None)},
        unit_symmetry=unit_symmetry,
    )


model = build()

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "committee", "--write"])
