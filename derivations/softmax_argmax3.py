"""Three-class softmax regression on an argmax teacher: issue 13's argmax for several classes.

The problem: inputs ``x ~ N(0, I_d)``, three teacher vectors with i.i.d. fields
``g_k = w*_k . x / sqrt(d) ~ N(0, 1)``, label ``y = argmax_k g_k``; the student has three class
vectors ``W`` (logits ``W x / sqrt(d)``), cross-entropy summed over samples, ``lam/2 |W|^2``.

Both argmax and softmax see only the logits modulo a common shift, so both live in the
two-dimensional plane orthogonal to ``(1, 1, 1)``. With the orthonormal basis ``A`` of that
plane (columns ``(2, -1, -1)/sqrt 6`` and ``(0, 1, -1)/sqrt 2``; rows ``a_k``):

* the teacher's label is ``argmax_k a_k . hstar`` with ``hstar = A^T g ~ N(0, I_2)`` (rho = 1);
* the l2-optimal student has ``sum_k W_k = 0`` (a common shift of the class vectors changes no
  logit difference and only adds penalty), i.e. ``W = A W_2`` with ``|W|^2 = |W_2|^2``; its
  logits are ``a_k . h`` with the two fields ``h = W_2 x / sqrt(d)``.

So this declaration (``r = r_t = 2``) is exactly multinomial logistic regression with three
classes; the label law of the argmax given the student's Gaussians is a bivariate normal orthant
probability (``replica.symbolic.channels.Argmax``, ``BivariateNormalCDF``). The order parameters are the
2 x 2 overlaps of ``W_2`` (equivalently of ``W`` restricted to the plane). Checked against ERM
(scikit-learn's multinomial logistic regression) in tests/test_classification.py.
"""
from __future__ import annotations

import sympy as sp

from replica import L2, Argmax, Domain, Model, TestObservable, TokenStatistics, fields, parameter, teacher_fields

h, hs = fields(1, 2), teacher_fields(1, 2)
lam = parameter("lam", r"\lambda", "strength of the $\\ell_2$ penalty")
#: rows a_k of the orthonormal basis of the plane orthogonal to (1, 1, 1)
A = sp.Matrix([[2 / sp.sqrt(6), 0], [-1 / sp.sqrt(6), 1 / sp.sqrt(2)], [-1 / sp.sqrt(6), -1 / sp.sqrt(2)]])
channel = Argmax([(A[k, :] * hs.T)[0, 0] for k in range(3)])
y = channel.label
logits = [(A[k, :] * h.T)[0, 0] for k in range(3)]
#: one-hot indicators of the labels 0, 1, 2 as polynomials in y
onehot = [(y - 1) * (y - 2) / 2, y * (2 - y), y * (y - 1) / 2]
#: 1 when the student's logits put label y on top
correct = sum(e * sp.Heaviside(z - logits[(k + 1) % 3]) * sp.Heaviside(z - logits[(k + 2) % 3])
              for k, (e, z) in enumerate(zip(onehot, logits)))

model = Model(
    name="softmax_argmax3",
    description="three-class softmax regression on an argmax teacher (logits in the plane orthogonal to (1,1,1)), "
                "l2 penalty",
    h=h, hstar=hs,
    loss=sp.log(sum(sp.exp(z) for z in logits)) - sum(e * z for e, z in zip(onehot, logits)),
    channel=channel,
    data=TokenStatistics.isotropic(1, 1),
    regularizer=L2(lam),
    parameters={lam: 0.1},
    domains={lam: Domain(0, None)},
    branches={"centered": ("m",)},
    observables=[TestObservable("classification_error", 1 - correct, r"\varepsilon_{01}",
                                "P(y != argmax of the student's logits) at a fresh sample")],
)

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "softmax_argmax3", "--write"])
