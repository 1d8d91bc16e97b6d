"""Logistic regression on a noisy (probit) teacher: the perceptron with label noise.

``L = 1`` token ``x ~ N(0, I_d)``, teacher field ``h* ~ N(0, 1)``, label ``y = sign(h* + sqrt(Delta) z)``
(a probit channel: its law ``Phi(y mu / sqrt(v + Delta))`` given the student's centre enters the
Gaussian measure), loss ``log(1 + exp(-y h))`` summed over samples, penalty ``lam/2 |w|^2``.
Reported: the test loss, the classification error ``P(y != sign h)`` against the noisy label,
the angle. Oracle: tests/oracles/classification.py.
"""
from __future__ import annotations

import sympy as sp

from replica import L2, Domain, Model, Probit, TokenStatistics, classification_error, fields, \
    parameter, student_teacher_angle, teacher_fields

h, hs = fields(1, 1), teacher_fields(1, 1)
lam = parameter("lam", r"\lambda", "strength of the $\\ell_2$ penalty")
delta = parameter("Delta", r"\Delta", "variance of the label noise")
channel = Probit(hs[0], delta)
y = channel.label

model = Model(
    name="perceptron_probit",
    description="logistic regression on a probit teacher y = sign(h* + sqrt(Delta) z), l2 penalty (a GLM)",
    h=h, hstar=hs,
    loss=sp.log(1 + sp.exp(-y * h[0])),
    channel=channel,
    data=TokenStatistics.isotropic(1, 1),
    regularizer=L2(lam),
    parameters={lam: 0.1, delta: 0.25},
    domains={lam: Domain(0, None), delta: Domain(0, None)},
    branches={"centered": ("m",)},
    observables=[classification_error(y, h[0], 'P(y != sign h) at a fresh sample (noisy label)'), student_teacher_angle()],
)

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "perceptron_probit", "--write"])
