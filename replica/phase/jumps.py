"""The thresholds' jump terms: what the tensor rule's error across the jumps of the argmin moves
``alpha_c`` and ``alpha_l`` by (:func:`replica.numeric.accuracy.jump_check` at the thresholds).

``replica phase --accuracy`` refines the rules until the thresholds stop moving; where the argmin
of the bracket jumps, tensor Gauss-Hermite refinements move a fixed point by less than their error
(docs/reference/accuracy.md, step 5), so that difference alone under-covers (measured at the paper's
``omega = 0.3``: ``alpha_l`` 1.1e-3 off the certified reference with a bar of 8.6e-4). Each
branch that defines a threshold is solved at it on the finest rule and checked against the
jump-aware rule; the first-order shifts go through the thresholds' exact derivatives:

* ``alpha_c`` (``Phi_high = Phi_low``): ``d(Phi_high - Phi_low)/dalpha = Psi_y,high - Psi_y,low``
  (envelope theorem), so ``|delta alpha_c| <= (e_Phi,high + e_Phi,low) / |Psi_y,high - Psi_y,low|``;
* ``alpha_l`` (``eps_g = eps_lin`` on the global-minimum branch): ``|delta alpha_l| <= e_eps_g /
  |d eps_g / d alpha|``, the slope from the branch's solved points.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..interface.generated_model import GeneratedModel
from ..numeric.accuracy import jump_check
from ..errors import ConvergenceError, InvalidStateError
from .results import CrossingStatus, PhaseResult
from .settings import SolverSettings


def threshold_jump_terms(module: GeneratedModel, parameters: Mapping[str, float] | None, res: PhaseResult,
                         settings: SolverSettings) -> tuple[dict[str, float], list[str]]:
    """Jump terms of ``alpha_c`` and ``alpha_l`` (absolute; 0 where no branch's rule misses jumps,
    absent where a threshold does not exist or its branch could not be re-solved) and notes."""
    terms: dict[str, float] = {}
    notes: list[str] = []
    checks: dict[tuple[str, float], tuple] = {}

    def checked(branch: str, alpha: float):
        key = (branch, alpha)
        if key not in checks:
            curve = res.curves.get(branch)
            if curve is None or not curve.points:
                checks[key] = None
                return None
            solver = settings.make_solver(module, parameters, branch)
            try:
                fp = solver.solve(alpha, x0=curve.interpolate_x(alpha))
            except (ConvergenceError, InvalidStateError) as exc:
                notes.append(f"jump term: the {branch} branch could not be re-solved at alpha = {alpha:.6g} ({exc})")
                checks[key] = None
                return None
            checks[key] = (fp, jump_check(solver, fp, alpha))
            note = getattr(checks[key][1], "note", None)
            if note is not None:  # the check did not run (its cost): no jump term, and why
                notes.append(f"jump term of the {branch} branch at alpha = {alpha:.6g}: {note}")
        return checks[key]

    def term(chk, name: str) -> float:
        return 0.0 if chk is None else float(chk.errors.get(name, 0.0))

    if res.alpha_c.value is not None and all(b in res.curves for b in res.pair):
        a = float(res.alpha_c.value)
        got = [checked(b, a) for b in res.pair]
        if all(g is not None for g in got):
            dpsi = abs(got[0][0].psi_y - got[1][0].psi_y)
            if dpsi > 0:
                terms["alpha_c"] = sum(term(g[1], "phi") for g in got) / dpsi
    al = res.alpha_l
    if al.value is not None and al.status is not CrossingStatus.SWITCH:
        a = float(al.value)
        branch = next((b for a0, a1, b in res.segments if a0 - 1e-12 <= a <= a1 + 1e-12), None)
        got = None if branch is None else checked(branch, a)
        if got is not None:
            curve = res.curves[branch]
            alphas, idx = np.unique(curve.alphas, return_index=True)
            eps = np.asarray(curve.values("eps_g"))[idx]
            slope = float(np.interp(a, 0.5 * (alphas[1:] + alphas[:-1]), np.diff(eps) / np.diff(alphas))) \
                if len(alphas) > 1 else 0.0
            if slope != 0.0:
                terms["alpha_l"] = term(got[1], "eps_g") / abs(slope)
    return terms, notes
