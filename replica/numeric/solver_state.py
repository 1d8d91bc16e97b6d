"""The state of a :class:`~replica.numeric.solver.Solver`: admissibility, the generic start, branches and signs.

A state is *admissible* when it is finite and every validity quantity of the model is positive
(``q`` positive definite, the teacher's residual covariance positive, ...). The generic start sits
near the small-``alpha`` end of every branch; a branch pins families to zero
(:mod:`replica.numeric.branches`), and a solve that lands on a smaller branch says so
(:data:`BRANCH_NOT_FOUND`). Reported signs follow ``m, theta >= 0``.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidStateError
from .branches import FREE, PINNABLE, branch_pinning, pinned
from .fixed_point import FixedPoint
from ..interface.generated_model import GeneratedModel
from .integrators import Permutation
from .unit_symmetry import canonical_units, has_units, specialised_start, unit_branch_notes

#: prefix of the note that a branch's solve landed on another branch's solution
BRANCH_NOT_FOUND = "branch not found"


class SolverState:
    """Admissibility, the start, the branch's symmetries and notes, the sign convention and the
    parameters of a :class:`~replica.numeric.solver.Solver` (module docstring)."""

    def _branch_symmetries(self) -> tuple[tuple[int, ...], ...]:
        """Sign flips of ``z`` (module ``SYMMETRIES``) valid on this branch: those whose
        families are pinned to zero (or are not order parameters of the model)."""
        mod = self.module
        own = set(pinned(mod, self.branch))
        out = []
        for fams, idx in mod.SYMMETRIES:
            if all(f in own or f not in mod.FAMILIES for f in fams):
                out.append(tuple(idx))
        # the unit permutations hold on every branch of a unit module (replica.numeric.unit_symmetry)
        out += [Permutation(p) for p in mod.UNIT_PERMUTATIONS]
        return tuple(out)

    @staticmethod
    def parameter_dict_from(module: GeneratedModel, p: np.ndarray) -> dict[str, float]:
        return dict(zip(module.PARAMETERS, np.asarray(p, dtype=float).tolist()))

    @property
    def parameter_dict(self) -> dict[str, float]:
        """The model parameters this solver uses, by name (defaults merged with overrides)."""
        return dict(zip(self.module.PARAMETERS, self.p.tolist()))

    def initial_state(self) -> np.ndarray:
        """A generic admissible start near the small-``alpha`` end of every branch.

        ``V`` takes its ``alpha -> 0`` value (the entropic update at ``xhat = 0``, e.g.
        ``sigma^2 / lambda`` for l2; ``rho_bar`` if that is not admissible), ``q = rho_bar/5``
        (small, as at small ``alpha``), and the free ``m`` and ``theta`` are set half-way so
        that the iteration does not sit on the symmetric (agnostic) point. Starting from the
        small-``alpha`` side selects the solution connected to the branch at small ``alpha``
        where the equations have several (e.g. the positional branch at ``alpha = 2``).
        """
        mod = self.module
        rb = float(np.mean(mod.rho_bar(self.p)))
        rb = rb if rb > 0 else 1.0
        v0 = np.full(len(self.names), np.nan)
        if self.entropic_rule is None:
            with np.errstate(all="ignore"):
                v0 = np.asarray(mod.entropic_update(np.zeros(len(self.conj_names)), self.p), dtype=float)
        x = np.zeros(len(self.names))
        for fam, idx in mod.FAMILIES.items():
            if fam in ("q", "V"):
                continue
            x[idx] = 0.5 * math.sqrt(0.2 * rb * rb) if fam == "theta" else 0.5
        for i in mod.SYMMETRIC_DIAGONAL:
            if mod.ORDER_PARAMETERS[i].startswith("q"):
                x[i] = 0.2 * rb
            else:
                x[i] = v0[i] if np.isfinite(v0[i]) and 0 < v0[i] < 1e6 else rb
        x[self.pinned] = 0.0
        if has_units(mod):  # start off the ties of other unit branches, on this branch's own
            x = specialised_start(mod, x, self.branch)
            x = self.project(x) if self.project is not None else x
        # With several teacher fields the equal theta entries above can make the teacher's
        # residual covariance rho - theta^T q^-1 theta singular (r = r_t = 2: exactly); shrink
        # them until every validity quantity is clearly positive (other models: unchanged).
        th = self.module.FAMILIES.get("theta", [])
        for _ in range(10):
            vals = np.atleast_1d(np.asarray(self.module.validity(x, self.p), dtype=float))
            if not th or np.all(vals > 1e-3 * rb):
                break
            x[th] *= 0.5
        return x

    def check_state(self, x: np.ndarray) -> None:
        """Raise :class:`InvalidStateError` unless every validity quantity is positive."""
        vals = np.atleast_1d(self.module.validity(x, self.p))
        bad = ~(vals > 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InvalidStateError(self.module.VALIDITY[i],
                                    f"must be positive, got {vals[i]:.3e} at "
                                    + ", ".join(f"{n}={v:.4g}" for n, v in zip(self.names, x)),
                                    dict(zip(self.names, x.tolist())))

    def _admissible(self, x: np.ndarray) -> bool:
        if not np.all(np.isfinite(x)):
            return False
        with np.errstate(all="ignore"):
            vals = np.atleast_1d(self.module.validity(x, self.p))
        return bool(np.all(vals > 0))

    def _fix_signs(self, x: np.ndarray, xhat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Flip ``m`` / ``theta`` (and conjugates) to the sign convention ``m, theta >= 0``."""
        x, xhat = x.copy(), xhat.copy()
        for fam in self.module.SIGN_FLIPS:
            idx = self.module.FAMILIES.get(fam, [])
            if idx and x[idx[0]] < 0:
                x[idx] *= -1
                xhat[idx] *= -1
        return canonical_units(self.module, x, xhat)

    def _branch_notes(self, fp: FixedPoint) -> list[str]:
        """Flag a branch that has merged into a smaller one (a family it leaves free is ~ 0, or the
        order parameters a unit branch ties are equal)."""
        unit = unit_branch_notes(self.module, self.branch, fp.x, BRANCH_NOT_FOUND)
        if self.branch == FREE:   # a unit note on the free branch informs, it does not say "not found"
            fp.notes += unit
            return []
        mod = self.module
        own = set(pinned(mod, self.branch))
        x = fp.x
        q = np.array([x[i] for i in mod.SYMMETRIC_DIAGONAL if self.names[i].startswith("q")])
        scale = math.sqrt(max(float(np.mean(q)), 1e-300)) if q.size else 1.0
        notes = []
        for fam in PINNABLE:
            idx = mod.FAMILIES.get(fam, [])
            if fam in own or not idx:
                continue
            size = float(np.max(np.abs(x[idx]))) / scale
            if size < 0.05:
                target = branch_pinning(mod, own | {fam})
                where = f"the {target} one" if target else f"on the subspace {fam} = 0"
                notes.append(f"{BRANCH_NOT_FOUND}: {fam} is {size:.1e} of sqrt(q), so this is not a {self.branch} "
                             f"fixed point but (within quadrature accuracy) {where}; no {self.branch} solution was "
                             f"found at this alpha from the starts tried (see 'replica phase' for where the "
                             f"{self.branch} branch ends)")
        return notes + unit
