"""The two-unit sign committee machine: a teacher with two hidden units, the label the sign of their vote.

``L = 1`` token ``x ~ N(0, I_d)``, teacher fields ``h*_1, h*_2``, label
``y = sign(sign(h*_1) + sign(h*_2))`` (``-1, 0, +1``: the units agree or tie; a :class:`DiscreteLabel`, its law
integrated over the sign patterns), Gaussian teacher weights. The student has two units as well and fits the
square loss of ``(tanh h_1 + tanh h_2) / 2`` to the label with an l2 penalty. Its Bayes-optimal inference
(``replica solve committee_sign --bayes``) specialises (the overlap stops being the same for every pair of
units) beyond ``alpha_spec`` (``replica phase committee_sign --bayes``); docs/how-to/bayes_optimal.md.
"""
from __future__ import annotations

import sympy as sp

from replica import L2, DiscreteLabel, Domain, Model, TokenStatistics, fields, parameter, teacher_fields

h, hs = fields(1, 2), teacher_fields(1, 2)
lam = parameter("lam", r"\lambda", "strength of the $\\ell_2$ penalty")
channel = DiscreteLabel(sp.sign(sp.sign(hs[0, 0]) + sp.sign(hs[0, 1])))
y = channel.label

model = Model(
    name="committee_sign",
    description="two-unit sign committee teacher y = sign(sign(h*_1) + sign(h*_2)), two tanh units, square loss, l2",
    h=h, hstar=hs,
    loss=(y - (sp.tanh(h[0, 0]) + sp.tanh(h[0, 1])) / 2) ** 2 / 2,
    channel=channel,
    data=TokenStatistics.isotropic(1, 1),
    regularizer=L2(lam),
    parameters={lam: 0.1},
    domains={lam: Domain(0, None)},
)

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "committee_sign", "--write"])
