import sympy as sp
from replica import L2, Domain, Model, Sign, TokenStatistics, fields, parameter, teacher_fields, Rademacher
h, hs = fields(1, 1), teacher_fields(1, 1)
lam = parameter("lam", r"\lambda")
channel = Sign(hs[0])
y = channel.label
model = Model(name="binary_perceptron", description="sign teacher with +-1 weights",
    h=h, hstar=hs, loss=sp.Max(0, 1 - y * h[0]), channel=channel, data=TokenStatistics.isotropic(1, 1),
    regularizer=L2(lam), parameters={lam: 0.1}, domains={lam: Domain(0, None)}, prior=Rademacher())
