"""A loss whose proximal bracket has no minimum is refused before any solve (replica.numeric.loss_bounds).

A square loss plus ``1/h`` used to be "solved" (``converged: true``, ``q = 1.4e-21``, a training loss
of ``-5e17``) and a concave square ran for minutes without output; both are one-line errors naming
``loss`` now, exit 2. The loss of the declaration below depends on parameters (``a (y - h)^2 / 2 -
1 / (h^2 + c)``), so the refusal is made at solve time, for the parameters given; at its defaults it
solves.
"""
from __future__ import annotations

import contextlib
import io
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

from replica.numeric.loss_bounds import unbounded_direction

SQUARE_DIP = textwrap.dedent('''
    """a (y - h)^2 / 2 - 1 / (h^2 + c): a square loss with a dip (a = 1, c = 1), concave (a < 0),
    with a pole (c = 0)."""
    from replica import L2, Domain, Model, TokenStatistics, fields, parameter, symbol, teacher_fields

    h, hs = fields(1, 1), teacher_fields(1, 1)
    noise = symbol("noise", "z")
    a, c, lam = parameter("a", "a"), parameter("c", "c"), parameter("lam", r"\\lambda")
    model = Model(name="square_dip", description="a square loss times a, minus 1/(h^2 + c)", h=h, hstar=hs,
                  loss=a * (hs[0] + noise / 2 - h[0]) ** 2 / 2 - 1 / (h[0] ** 2 + c), noise=[noise],
                  data=TokenStatistics.isotropic(1, 1), regularizer=L2(lam), parameters={a: 1, c: 1, lam: 0.1},
                  domains={lam: Domain(0, None)})
''')


@pytest.mark.parametrize("flags", [["--c", "0"], ["--a", "-1"]], ids=["pole", "concave"])
def test_a_bracket_without_minimum_is_refused_in_one_line(tmp_path, flags):
    from replica.cli import main

    path = tmp_path / "square_dip.py"
    path.write_text(SQUARE_DIP)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["solve", str(path), "--alpha", "2", "--json", *flags])
    lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("replica solve:")]
    assert rc == 2 and out.getvalue() == ""
    assert len(lines) == 1 and "error: loss:" in lines[0] and "unbounded below" in lines[0], err.getvalue()


def test_at_its_defaults_the_same_declaration_solves(tmp_path):
    from replica.registry import load_module
    from replica.numeric.quadrature import gauss_hermite
    from replica.numeric.solver import Solver

    path = tmp_path / "square_dip.py"
    path.write_text(SQUARE_DIP)
    fp = Solver(load_module(str(path)), rule=gauss_hermite(3, 12), backend="numpy", error_estimate=False).solve(2.0)
    assert fp.converged and fp.order["q_1"] > 0.1


def _fake(loss):
    """A module whose bracket is ``(h - 0.3)^2 / (2V) + loss(h)`` (one field, V = x[1])."""
    return SimpleNamespace(MODEL="fake", bracket=lambda h, z, x, p: (h[0] - 0.3) ** 2 / (2 * x[1]) + loss(h[0]),
                           FAMILIES={"q": [0], "V": [1]}, SYMMETRIC_DIAGONAL=(0, 1), PROX_DIM=1,
                           GAUSSIANS=("xi",), DISCRETE=(), LABEL_VALUES=None)


UNBOUNDED = {"log h": np.log, "1/(h - 1.2345) + h^2": lambda h: 1 / (h - 1.2345) + h * h,
             "log|h - 0.7123|": lambda h: np.log(np.abs(h - 0.7123)),
             "-1/|h - 0.3|^0.5 (a grid point on the pole)": lambda h: -1 / np.abs(h - 0.3) ** 0.5,
             "-1e-3 h^2": lambda h: -1e-3 * h * h, "-h^2 / log(2 + h^2)": lambda h: -h * h / np.log(2 + h * h),
             "sqrt(h^2 - 1) (undefined inside: no minimum either)": lambda h: np.sqrt(h * h - 1)}
BOUNDED = {"-1000 h (linear: the bracket has a minimum)": lambda h: -1000 * h,
           "-|h|^1.5": lambda h: -np.abs(h) ** 1.5, "logistic": lambda h: np.logaddexp(0, -h),
           "|h - 0.7123|^0.3": lambda h: np.abs(h - 0.7123) ** 0.3, "h^4 - 10 h^2": lambda h: h ** 4 - 10 * h * h,
           "1/h^2": lambda h: 1 / h ** 2, "exp(h^2) (overflows)": lambda h: np.exp(h * h),
           "a narrow well": lambda h: -np.exp(-(h - 0.7) ** 2 / 1e-6)}


@pytest.mark.parametrize("name", list(UNBOUNDED) + list(BOUNDED))
def test_the_check_tells_poles_quadratic_falls_and_gaps_from_bounded_losses(name):
    why = unbounded_direction(_fake({**UNBOUNDED, **BOUNDED}[name]), np.zeros(1), np.array([1.0, 1.0]))
    assert (why is not None) == (name in UNBOUNDED), why

