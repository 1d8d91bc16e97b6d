"""The specialisation threshold ``alpha_spec`` of a model with exchangeable units.

On the unspecialised branch every student unit overlaps every teacher unit alike; it is a fixed
subspace of the saddle-point map (:mod:`replica.numeric.unit_symmetry`). ``alpha_spec`` is where
that fixed point becomes linearly unstable towards specialisation: the Jacobian of the map
``x -> x_new`` (order parameters to conjugates to order parameters), restricted to the directions
that leave the unspecialised subspace inside the specialised ansatz, gets an eigenvalue crossing
one. There the equations have a bifurcation (``det(I - DF) = 0``): a specialised branch leaves the
unspecialised one (continuously for two units; for three or more the specialised branch can exist
below ``alpha_spec`` already, a first-order transition whose ``alpha_c`` is where the free
entropies cross).

The map commutes with the larger group of the unspecialised branch, so at its fixed point the
Jacobian maps the breaking directions onto themselves (they are the non-trivial isotypic part of
the specialised subspace): their block of the Jacobian is computed alone, by central differences
of the map along each direction (two map evaluations per direction; one direction for a committee;
:func:`replica.numeric.unit_symmetry.breaking_eigenvalues`, which a cold solve also uses to say
why it reports the unspecialised fixed point).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from ..errors import ConvergenceError, InvalidStateError
from ..interface.generated_model import GeneratedModel
from ..numeric.solver import Solver
from ..numeric.unit_symmetry import SPECIALISED, UNSPECIALISED, breaking_eigenvalues, has_units, largest_breaking
from .results import BranchCurve, Crossing, CrossingStatus

#: root-finder tolerance on alpha_spec, relative
ALPHA_TOL = 1e-4


def no_threshold(module: GeneratedModel) -> str | None:
    """Why ``module`` has no ``alpha_spec`` (None when it has one)."""
    if not has_units(module):
        return (f"{module.MODEL} has no exchangeable units (no two columns of h that the loss and the penalty "
                "cannot tell apart), or is derived with the full matrices (unit_symmetry=False)")
    if SPECIALISED not in module.BRANCHES:
        return (f"{module.MODEL} has no specialised branch: no block of the teacher's units is exchangeable like the "
                "student's (e.g. a single teacher field), so every fixed point of the ansatz is unspecialised")
    return None


def specialisation_threshold(module: GeneratedModel, parameters: Mapping[str, float] | None,
                             curve: BranchCurve | None, make_solver: Callable[[str], Solver],
                             progress: Callable[[str], None] | None = None
                             ) -> tuple[Crossing, list[tuple[float, float]]]:
    """``alpha_spec`` along the followed unspecialised ``curve``, and the largest breaking eigenvalue
    at each of its points (``(alpha, mu)``).

    ``make_solver(branch)``: a solver of ``module`` on ``branch`` with the phase settings. The
    eigenvalue is computed at every solved point of the curve; where it crosses one between two
    points, the crossing is root-found (the unspecialised point re-solved from the nearer neighbour
    at each trial ``alpha``). ``None`` with the reason where there is no crossing in the followed
    range, or no curve.
    """
    why = no_threshold(module)
    if why is not None:
        return Crossing(None, why), []
    if curve is None or not len(curve):
        return Crossing(None, "the unspecialised branch was not solved in the range"), []
    free = make_solver(SPECIALISED)
    tied = make_solver(UNSPECIALISED)
    mus: list[tuple[float, float]] = []
    for p in curve.points:
        try:
            mus.append((p.alpha, largest_breaking(breaking_eigenvalues(free, p.x, p.alpha))))
        except (InvalidStateError, ConvergenceError):
            continue
    if not mus:
        return Crossing(None, "the breaking eigenvalue could not be evaluated on the unspecialised branch"), mus
    a0, a1 = mus[0][0], mus[-1][0]
    above = [a for a, mu in mus if mu > 1]
    if not above:
        top = max(mus, key=lambda t: t[1])
        return Crossing(None, f"the unspecialised fixed point is linearly stable towards specialisation on the "
                              f"whole followed range [{a0:.4g}, {a1:.4g}] (largest breaking eigenvalue "
                              f"{top[1]:.4g} at alpha = {top[0]:.4g} < 1)"), mus
    if mus[0][1] > 1:
        return Crossing(None, f"the unspecialised fixed point is already unstable towards specialisation at the "
                              f"smallest solved alpha = {a0:.4g} (breaking eigenvalue {mus[0][1]:.4g} > 1): "
                              f"lower --alpha-min"), mus
    k = next(i for i, (a, mu) in enumerate(mus) if mu > 1)
    (lo, mlo), (hi, mhi) = mus[k - 1], mus[k]
    states = {p.alpha: p.x for p in curve.points}
    evaluations = 0

    def g(alpha: float, x0: np.ndarray) -> tuple[float, np.ndarray]:
        fp = tied.solve(alpha, x0=x0)
        return largest_breaking(breaking_eigenvalues(free, fp.x, alpha)) - 1.0, fp.x

    x_lo, x_hi = states[lo], states[hi]
    glo, ghi = mlo - 1.0, mhi - 1.0
    try:
        # regula falsi with the Illinois modification: mu(alpha) is smooth and monotone near a crossing
        side = 0
        while hi - lo > ALPHA_TOL * hi and evaluations < 30:
            a = hi - ghi * (hi - lo) / (ghi - glo)
            if not lo < a < hi:
                a = 0.5 * (lo + hi)
            x0 = x_lo + (a - lo) / (hi - lo) * (x_hi - x_lo)
            ga, xa = g(a, x0)
            evaluations += 1
            if progress is not None:
                progress(f"alpha_spec: breaking eigenvalue {ga + 1:.6g} at alpha = {a:.6g}")
            if ga > 0:
                hi, ghi, x_hi = a, ga, xa
                if side == 1:
                    glo *= 0.5
                side = 1
            else:
                lo, glo, x_lo = a, ga, xa
                if side == -1:
                    ghi *= 0.5
                side = -1
    except (InvalidStateError, ConvergenceError) as exc:
        return Crossing(None, f"the root refinement between alpha = {lo:.6g} and {hi:.6g} failed: {exc}",
                        (lo, hi), evaluations, CrossingStatus.FAILED), mus
    value = lo - glo * (hi - lo) / (ghi - glo)
    return Crossing(value, "the unspecialised fixed point becomes linearly unstable towards specialisation (an "
                           "eigenvalue of the map's Jacobian along the breaking directions crosses 1); on the "
                           "working rule, without an error bar: the crossing moves with the rule (re-run with "
                           "--quadrature to see by how much)",
                    (mus[k - 1][0], mus[k][0]), evaluations), mus


def breaking_profile(module: GeneratedModel, points: Sequence, make_solver: Callable[[str], Solver]
                     ) -> list[tuple[float, float]]:
    """``(alpha, largest breaking eigenvalue)`` at unspecialised fixed points ``points`` (objects with
    ``alpha`` and ``x``), for plots and checks."""
    free = make_solver(SPECIALISED)
    return [(p.alpha, largest_breaking(breaking_eigenvalues(free, p.x, p.alpha))) for p in points]
