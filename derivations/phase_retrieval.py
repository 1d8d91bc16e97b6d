"""Real phase retrieval: square loss on ``|h|`` with labels ``y = |h*|`` (a kinked continuous label).

``L = 1`` token ``x ~ N(0, I_d)``, teacher field ``h* ~ N(0, 1)``, label ``y = |h*|``, loss
``(|h*| - |h|)^2`` and l2 penalty ``lam`` (``lam = 0``: the plain empirical risk). The label is a kinked
function of the teacher field, with a density (the law of ``|u|`` given the student's centre is the
sum over the preimages ``+-y``); the quadrature puts panel boundaries where ``h*`` changes sign
(docs/how-to/rsb.md). The loss is even in ``h``: the global prox switches between ``h > 0`` and
``h < 0`` at ``omega = 0``, so the replica-symmetric point is RS-unstable wherever it is not at zero
loss, and ``replica solve phase_retrieval --rsb 1`` gives the zero-temperature 1RSB point. The
``uninformative`` branch pins ``theta = 0`` (the student ignores the teacher's direction).
"""
from __future__ import annotations

import sympy as sp

from replica import L2, Domain, Model, TokenStatistics, fields, parameter, teacher_fields

h, hs = fields(1, 1), teacher_fields(1, 1)
lam = parameter("lam", r"\lambda", "strength of the $\\ell_2$ penalty")

model = Model(
    name="phase_retrieval",
    description="real phase retrieval: square loss on |h| with labels y = |h*|, l2 penalty (a GLM with L = 1)",
    h=h, hstar=hs,
    loss=(sp.Abs(hs[0]) - sp.Abs(h[0])) ** 2,
    data=TokenStatistics.isotropic(1, 1),
    regularizer=L2(lam),
    parameters={lam: 0.0},
    domains={lam: Domain(0, None)},
    branches={"uninformative": ("theta",)},
)

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "phase_retrieval", "--write"])
