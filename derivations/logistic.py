"""l2-regularised logistic regression on a sign teacher: the GLM canon's classifier.

``L = 1`` token ``x ~ N(0, I_d)``, teacher field ``h* ~ N(0, 1)``, label ``y = sign(h*)`` (a
channel: the teacher enters the Gaussian measure, never the integrand), loss
``log(1 + exp(-y h))`` summed over samples, penalty ``lam/2 |w|^2`` summed over coordinates.
Reported besides the test loss: the classification error ``P(y != sign h)`` and the angle
between student and teacher. Oracle: tests/oracles/classification.py.
"""
from __future__ import annotations

import sympy as sp

from replica import L2, Domain, Model, Sign, TokenStatistics, classification_error, fields, parameter, \
    student_teacher_angle, teacher_fields

h, hs = fields(1, 1), teacher_fields(1, 1)
lam = parameter("lam", r"\lambda", "strength of the $\\ell_2$ penalty")
channel = Sign(hs[0])
y = channel.label

model = Model(
    name="logistic",
    description="logistic regression on a sign teacher y = sign(h*), l2 penalty (a GLM with L = 1)",
    h=h, hstar=hs,
    loss=sp.log(1 + sp.exp(-y * h[0])),
    channel=channel,
    data=TokenStatistics.isotropic(1, 1),
    regularizer=L2(lam),
    parameters={lam: 0.1},
    domains={lam: Domain(0, None)},
    branches={"centered": ("m",)},
    observables=[classification_error(y, h[0]), student_teacher_angle()],
)

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "logistic", "--write"])
