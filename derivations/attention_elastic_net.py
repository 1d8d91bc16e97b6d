"""The paper's tied attention with an elastic-net penalty ``lam1 |w|_1 + lam2/2 |w|^2``.

The entropic potential is then a Moreau envelope whose proximal map (soft thresholding)
sympy finds in closed form; the solver averages it numerically. With ``lam1 = 0`` the
model is exactly ``attention_tied`` with ``lambda = lam2``.
"""
from derivations.attention_tied import build

model = build(penalty="elastic_net", name="attention_elastic_net")

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "attention_elastic_net", "--write"])
