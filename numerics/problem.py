"""A declared model at finite size: the empirical risk built from the declaration itself.

:class:`Problem` reads the same sympy objects the theory is derived from
(:class:`replica.symbolic.model.Model`): the token statistics (the spectral law's atoms: eigenvalues
``gamma`` and positional projections ``pi``), the teacher fields and the channel or the target
written into the loss, the student fields, the per-sample loss, the penalty and the observables.
At dimension ``d`` and sample complexity ``alpha`` one *instance* (:meth:`Problem.instance`) is

* coordinates ``i = 1..d`` split between the atoms in proportion to their weights; token ``l``
  is ``x_l ~ N(0, diag(gamma_l))``, its encoding ``p_l`` has entries ``pi_l / sqrt(d)``; with token
  clusters every sample first draws its label configuration from the declared label law, and token
  ``l`` in cluster ``c`` takes the eigenvalues and projections (encoding plus cluster mean) of its
  slot ``(l, c)``; the label indicators ``e_{lc}`` enter the loss as the declaration writes them;
* a teacher ``Q* in R^{d x r_t}`` with orthogonal columns of norm ``sqrt(d)`` (``tau ~ N(0, I)``
  with its empirical covariance made exact), teacher fields ``h*_l = Q*^T x_l / sqrt(d)``; labels
  drawn from the channel's law (``Channel.sample``) where the model has one, standard Gaussian
  ``noise`` symbols drawn per sample;
* ``n = round(alpha d)`` training samples; the student fields ``h_l = W^T (x_l + p_l) / sqrt(d)``.

:meth:`Problem.fit` minimises ``R(W) = sum_mu loss(h_mu, ...) + sum_i r(w_i)`` (the loss summed
over samples, the penalty over the rows of ``W``; docs/explanation/theory.md §1):

* convex GLMs (one token, rank one, no encodings; a square loss with an l2 or l1 penalty, or the
  logistic or hinge loss of a +-1 label with an l2 penalty, as the declaration's factors say:
  :class:`~replica.symbolic.losses.SquareLoss`, :class:`~replica.symbolic.losses.LogisticLoss`,
  :class:`~replica.symbolic.losses.HingeLoss`, :class:`~replica.symbolic.regularizers.L2`,
  :class:`~replica.symbolic.regularizers.L1`; never the model's name) go to an exact solver
  (:mod:`numerics.glm_solvers`: Cholesky, scikit-learn with an exact polish; optimality checked by the
  KKT residual);
* everything else to torch (float64): L-BFGS with a strong-Wolfe line search on the lambdified
  risk, or, for a penalty with a non-smooth part (``Abs``), FISTA proximal gradient with the
  theory's closed-form prox. Converged when ``|grad R|_2 / sqrt(d)`` (the gradient mapping for a
  non-smooth penalty) is below ``tol``.

A *branch* pins families to zero; the fit starts on it (the teacher's columns where ``theta`` is
free, the encodings' direction where ``m`` is free) and, for a smooth penalty, stays on it: ``W``
is constrained orthogonal to the encodings where ``m`` is pinned and to ``Sigma_l Q*`` where
``theta`` is pinned, so the minimiser is the branch's finite-size counterpart even where the branch
is not the global minimum (``constrain=False``: the branch sets the start only).

:meth:`Problem.measure` reports the order parameters ``q_l = W^T Sigma_l W / d``,
``m_l = W^T p_l / sqrt(d)``, ``theta_l = W^T Sigma_l Q* / d`` (per slot with clusters) under the
generated module's names,
the training loss ``R(W)/d``, and every declared observable: test-point observables on ``n_test``
fresh test samples (their fields drawn from their exact law given ``W``: jointly Gaussian with
means ``m_l`` and covariances ``q_l, theta_l, rho_l``), state observables at the measured order
parameters, entropic observables averaged over the rows of ``W``. Signs that the loss leaves free
(a column of ``h`` whose flip leaves the loss unchanged, a teacher column likewise) are fixed as the
theory reports them (``m >= 0``, else ``theta >= 0``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import sympy as sp

from replica.interface.generated_model import GeneratedModel, as_model
from replica.errors import ParameterError

from . import units
from .deps import require

__all__ = ["Problem", "Instance", "Fit", "seed_streams"]

#: scale of the noise added to every column of the initial weights (breaks stationary subspaces)
INIT_NOISE = 1e-2
#: default tolerance on |grad R|_2 / sqrt(d) (RMS per row of W)
DEFAULT_TOL = 1e-7
#: KKT residual (max norm) below which an exact GLM solve counts as converged (numerics.glm's)
KKT_TOL = 1e-8


class Softplus(sp.Function):
    """``log(1 + exp(x))``, printed as a stable softplus (numpy ``logaddexp``, torch ``softplus``)."""

    nargs = 1


def _stable(expr: sp.Expr) -> sp.Expr:
    """``expr`` with every ``log(1 + exp(u))`` written as :class:`Softplus` (no overflow for large u)."""
    def is_softplus(e: sp.Basic) -> bool:
        if not isinstance(e, sp.log) or not e.args[0].is_Add:
            return False
        terms = e.args[0].args
        return len(terms) == 2 and sp.Integer(1) in terms and any(isinstance(t, sp.exp) for t in terms)

    def to_softplus(e: sp.Basic) -> sp.Expr:
        u = next(t for t in e.args[0].args if isinstance(t, sp.exp)).args[0]
        return Softplus(u)

    return sp.sympify(expr).replace(is_softplus, to_softplus)


def _torch_functions(torch) -> dict[str, Callable]:
    """Translations that sympy's torch printer lacks or gets wrong for tensors."""
    def _like(args):
        ref = next((a for a in args if isinstance(a, torch.Tensor)), None)
        return [a if isinstance(a, torch.Tensor) else torch.as_tensor(a, dtype=ref.dtype, device=ref.device)
                for a in args] if ref is not None else [torch.as_tensor(a) for a in args]

    def tmax(*args):
        out, *rest = _like(args)
        for b in rest:
            out = torch.maximum(out, b)
        return out

    def tmin(*args):
        out, *rest = _like(args)
        for b in rest:
            out = torch.minimum(out, b)
        return out

    def heaviside(x, h0=0.5):
        x = _like([x])[0]
        return torch.heaviside(x, torch.as_tensor(h0, dtype=x.dtype, device=x.device))

    def scalar_or_tensor(tf: Callable, mf: Callable) -> Callable:
        return lambda x: tf(x) if isinstance(x, torch.Tensor) else mf(float(x))

    # under the names sympy's torch printer writes (unqualified): max, min, heaviside, sqrt, ...
    return {"max": tmax, "min": tmin, "heaviside": heaviside, "Softplus": torch.nn.functional.softplus,
            "sqrt": scalar_or_tensor(torch.sqrt, math.sqrt), "exp": scalar_or_tensor(torch.exp, math.exp),
            "log": scalar_or_tensor(torch.log, math.log)}


def _torch_printer():
    """sympy's torch printer, unqualified names (resolved in :func:`_torch_functions` first) and
    lenient about the functions it does not know (:class:`Softplus`, resolved there too)."""
    from sympy.printing.pytorch import TorchPrinter

    return TorchPrinter({"strict": False, "fully_qualified_modules": False})


NUMPY_FUNCTIONS = {"Softplus": lambda x: np.logaddexp(0.0, x)}


def _lambdify_numpy(args: list, expr: Any) -> Callable:
    """``expr`` (made overflow-safe by :func:`_stable`) as a numpy function of ``args``; every numpy
    lambdification of this module goes through here, so each resolves :data:`NUMPY_FUNCTIONS`
    (a ``log(1 + exp(.))`` anywhere, e.g. in a target derived from the loss, becomes :class:`Softplus`)."""
    stable = [_stable(e) for e in expr] if isinstance(expr, (list, tuple)) else _stable(expr)
    return sp.lambdify(args, stable, [NUMPY_FUNCTIONS, "numpy", "scipy"])


def _broadcast(value: Any, n: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(value, dtype=float), (n,))


def seed_streams(seed: int, d: int) -> dict[str, np.random.Generator]:
    """Independent generators of one run (teacher, training set, test set, initialisation) from
    ``(seed, d)``: the same seed at two dimensions draws unrelated instances."""
    names = ("teacher", "train", "test", "init")
    return dict(zip(names, (np.random.default_rng(s) for s in np.random.SeedSequence([int(seed), int(d)]).spawn(4))))


@dataclass
class Instance:
    """One draw of the finite-size problem (see the module docstring)."""

    d: int
    n: int
    gamma: np.ndarray   # (L, d) diagonal of Sigma_l
    P: np.ndarray       # (L, d) encodings p_l
    Qstar: np.ndarray   # (d, r_t)
    X: np.ndarray       # (n, L, d) training tokens
    teacher: list[np.ndarray]   # the loss's teacher arguments, (n,) each: the label, or the h* entries
    noise: list[np.ndarray]     # one (n,) column per noise symbol, then the label indicators
    rng: dict[str, np.random.Generator] = field(repr=False)
    slot: np.ndarray | None = field(default=None, repr=False)   # (n, L): the slot of every token

    @property
    def inputs(self) -> np.ndarray:
        """What the student sees, ``x + p`` (with the cluster means), (n, L, d)."""
        return self.X + self.P[self.slot]


@dataclass
class Fit:
    """A minimiser ``W`` (``d x r``) and how it was found."""

    W: np.ndarray
    solver: str
    grad_norm: float
    converged: bool
    iterations: int
    seconds: float
    notes: list[str] = field(default_factory=list)


class Problem:
    """The declared model ``model`` (a :class:`replica.symbolic.model.Model`) at finite size (module docstring).

    ``module`` is its generated module, which :meth:`measure` needs (the order parameters' names, the
    state observables); ``None`` suffices to draw instances, fit them and evaluate the risk.
    ``parameters`` overrides the declared defaults by name.
    """

    def __init__(self, model, module: GeneratedModel | None, parameters: Mapping[str, float] | None = None):
        self.model, self.module = model, (as_model(module) if module is not None else None)
        values = {s.name: float(v) for s, v in model.defaults.items()}
        for k, v in dict(parameters or {}).items():
            if k not in values:
                raise ParameterError(k, f"model {model.name} has no parameter {k!r}; it has {list(values)}")
            values[k] = float(v)
        self.values = values
        self.subs = {s: values[s.name] for s in model.defaults}
        data = self.data = model.data
        self.L, self.r, self.r_t = model.L, model.r, model.r_t
        self.atom_weights, self.atom_gamma, self.atom_pi = data.numeric_atoms(values)   # (atoms,), (atoms, slots)
        # slots: (token, cluster) pairs (the tokens themselves without clusters); the label law
        self.slots = list(data.slots)
        self.slot_labels = tuple(data.slot_labels)
        self.configs, self.config_probs = data.configuration_table(values)
        self.label_syms = list(data.label_symbols)
        self.h_syms = list(model.h)            # row-major: h[l, j] at l * r + j
        self.hs_syms = list(model.hstar)
        self.channel = model.channel
        self.teacher_syms = [self.channel.label] if self.channel is not None else self.hs_syms
        self.noise_syms = list(model.noise)
        self.args = self.h_syms + self.teacher_syms + self.noise_syms + self.label_syms
        self.loss_expr = _stable(sp.sympify(model.loss).subs(self.subs))
        self._loss_np = _lambdify_numpy(self.args, self.loss_expr)
        self._loss_torch: Callable | None = None
        if self.channel is not None:
            self._forms = _lambdify_numpy(self.hs_syms, list(self.channel.forms))
        w = sp.Matrix([sp.Symbol(f"w_row_{k}", real=True) for k in range(self.r)])
        self.w_syms = list(w)
        self.penalty_expr = sp.sympify(model.regularizer.expression(w)).subs(self.subs)
        self._penalty_np = _lambdify_numpy(self.w_syms, self.penalty_expr)
        self.observables = list(model.observables)
        self._test_obs = {o.name: _lambdify_numpy(self.args, sp.sympify(o.expr).subs(self.subs))
                          for o in self.observables if o.kind == "test"}
        self._entropic_obs = {o.name: _lambdify_numpy(list(o.w), sp.sympify(o.expr).subs(self.subs))
                              for o in self.observables if o.kind == "entropic"}
        self.nonsmooth_penalty = self.penalty_expr.has(sp.Abs)
        self.glm = self._glm_kind()
        self.student_groups, self.teacher_flips = self._sign_freedom()
        self.rotation_free = self._rotation_freedom()

    # ------------------------------------------------------------------ structure
    @property
    def has_encodings(self) -> bool:
        """Whether any token has a positional encoding (``m`` can be non-zero)."""
        return bool(np.any(self.atom_pi != 0))

    def _penalty_kind(self) -> tuple[str, float] | None:
        """``("l2", lam)`` or ``("l1", lam1)`` where the declared penalty of a scalar row is that factor
        (:class:`~replica.symbolic.regularizers.L2` with one weight, :class:`~replica.symbolic.regularizers.L1`)."""
        from replica.symbolic.regularizers import L1, L2

        reg = self.model.regularizer
        if self.r != 1:
            return None
        if isinstance(reg, L2) and not isinstance(reg.lam, (list, tuple)):
            return ("l2", float(reg.weights(self.values)))
        if isinstance(reg, L1):
            return ("l1", float(sp.sympify(reg.lam1).subs(self.subs)))
        return None

    def _glm_kind(self) -> dict[str, Any] | None:
        """The exact solver that fits this declaration, if any (module docstring), from its factors:
        the loss's kind and field, the penalty's, the channel's label values."""
        from replica.symbolic.losses import HingeLoss, LogisticLoss, SquareLoss

        if self.L != 1 or self.r != 1 or self.has_encodings or self.label_syms:
            return None
        pen = self._penalty_kind()
        loss = self.model.loss_factor
        if pen is None or loss.field != self.h_syms[0]:
            return None
        if isinstance(loss, SquareLoss):
            curvature = float(sp.sympify(loss.curvature).subs(self.subs))
            if not curvature > 0:
                return None
            target = sp.sympify(loss.target).subs(self.subs)
            fn = _lambdify_numpy(self.teacher_syms + self.noise_syms, target)
            return {"loss": "square", "factor": loss, "curvature": curvature, "target": fn, "penalty": pen,
                    "target_moments": self._target_moments(loss.target)}
        if not isinstance(loss, (LogisticLoss, HingeLoss)) or self.channel is None or loss.label != self.channel.label:
            return None
        if tuple(self.channel.values) != (-1, 1) or pen[0] != "l2" or not pen[1] > 0:
            return None
        # the loss's kind in words (the factor's class: LogisticLoss -> "logistic")
        return {"loss": type(loss).__name__.removesuffix("Loss").lower(), "factor": loss, "penalty": pen}

    def _target_moments(self, target: sp.Expr) -> tuple[float, float, float] | None:
        """``(a, rho, b2)`` of a target ``y = a h* + sum_k b_k z_k`` linear in one teacher field ``h*``
        (variance ``rho``) and the noise symbols ``z_k`` (``b2 = sum_k b_k^2``): the population test
        error of a square loss given the weights; None for another target."""
        if len(self.teacher_syms) != 1 or self.channel is not None:
            return None
        hs = self.teacher_syms[0]
        coeffs = [sp.diff(target, v) for v in [hs, *self.noise_syms]]
        rest = sp.simplify(target - sum(c * v for c, v in zip(coeffs, [hs, *self.noise_syms])))
        if rest != 0 or any(c.free_symbols & {hs, *self.noise_syms} for c in coeffs):
            return None
        num = lambda e: float(sp.sympify(e).subs(self.subs))  # noqa: E731
        rho = num(self.data.rho(0, 1)[0, 0])
        return num(coeffs[0]), rho, num(sum(c ** 2 for c in coeffs[1:]))

    def _sign_freedom(self) -> tuple[list[list[int]], list[int]]:
        """Student column groups and teacher columns whose sign flip leaves the loss unchanged."""
        _, H, T, Z = self._probe(seed=1)

        def loss(Hm, Tm):
            return self._probe_loss(Hm, Tm, Z)

        base = loss(H, T)

        def invariant(cols: list[int]) -> bool:
            H2 = H.copy()
            H2[:, :, cols] *= -1
            return bool(np.allclose(loss(H2, T), base, rtol=1e-10, atol=1e-12))

        singles = [j for j in range(self.r) if invariant([j])]
        if len(singles) == self.r:
            groups = [[j] for j in range(self.r)]
        elif invariant(list(range(self.r))):
            groups = [list(range(self.r))]
        else:
            groups = []
        tflips = []
        if self.channel is None:
            for t in range(self.r_t):
                T2 = [c.copy() for c in T]
                for l in range(self.L):
                    T2[l * self.r_t + t] *= -1
                if np.allclose(loss(H, T2), base, rtol=1e-10, atol=1e-12):
                    tflips.append(t)
        return groups, tflips

    def _rotation_freedom(self) -> bool:
        """Whether the loss is unchanged when every token's student fields are rotated together,
        ``h_l -> O^T h_l`` for ``O`` in ``O(r)``, ``r >= 2`` (tied rank-r attention): the weights are then
        defined up to a rotation of their columns, and only rotation-invariant overlaps are compared."""
        if self.r < 2:
            return False
        rng, H, T, Z = self._probe(seed=2)
        O, _ = np.linalg.qr(rng.standard_normal((self.r, self.r)))
        return bool(np.allclose(self._probe_loss(H @ O, T, Z), self._probe_loss(H, T, Z), rtol=1e-10, atol=1e-12))

    def _probe(self, seed: int) -> tuple[np.random.Generator, np.ndarray, list, list]:
        """24 random samples to test a symmetry of the loss on: student fields ``H`` (samples, L, r), teacher
        columns ``T`` (the channel's label values where it has some), noise and label columns ``Z``; and the
        generator, to draw more from the same stream."""
        rng = np.random.default_rng(seed)
        k = 24
        H = 1.3 * rng.standard_normal((k, self.L, self.r))
        if self.channel is not None:
            T = [rng.choice(np.asarray(self.channel.values, dtype=float), k)]
        else:
            T = [1.1 * rng.standard_normal(k) for _ in self.teacher_syms]
        Z = [rng.standard_normal(k) for _ in self.noise_syms]
        Z += self.label_columns(self.configs[rng.choice(len(self.configs), k, p=self.config_probs)])
        return rng, H, T, Z

    def _probe_loss(self, H: np.ndarray, T: list, Z: list) -> np.ndarray:
        """The loss of each probe sample (:meth:`_probe`)."""
        return _broadcast(self._loss_np(*self._h_columns(H), *T, *Z), len(H))

    # ------------------------------------------------------------------ data
    def label_columns(self, slot: np.ndarray) -> list[np.ndarray]:
        """The one-hot label indicators ``e_{lc}`` (the model's ``label_symbols``) of samples whose tokens
        sit in the slots ``slot`` (n, L) (:meth:`replica.symbolic.data.TokenStatistics.label_columns`)."""
        return self.data.label_columns(slot)

    def coordinates(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """``(gamma, P)``, each ``(slots, d)``: the data law at ``d`` coordinates
        (:meth:`replica.symbolic.data.TokenStatistics.coordinates`)."""
        return self.data.coordinates(d, self.values)

    def instance(self, alpha: float, d: int, seed: int) -> Instance:
        """Draw the training set of seed ``seed`` at dimension ``d`` (``n = round(alpha d)`` samples)."""
        rng = seed_streams(seed, d)
        n = int(round(alpha * d))
        gamma, P = self.coordinates(d)
        G = rng["teacher"].standard_normal((d, self.r_t))
        Qs, _ = np.linalg.qr(G)
        Qstar = Qs * math.sqrt(d)
        slot = self.data.sample_slots(n, rng["train"], self.values)     # the data law's sampler
        X = self.data.sample_tokens(gamma, slot, rng["train"])
        HS = np.einsum("nld,dt->nlt", X, Qstar) / math.sqrt(d)
        teacher = self._teacher_args(HS, rng["train"])
        noise = [rng["train"].standard_normal(n) for _ in self.noise_syms] + self.label_columns(slot)
        return Instance(d=d, n=n, gamma=gamma, P=P, Qstar=Qstar, X=X, teacher=teacher, noise=noise, rng=rng,
                        slot=np.ascontiguousarray(slot))

    def _teacher_args(self, HS: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
        """The loss's teacher arguments at teacher fields ``HS`` (n, L, r_t): the channel's label drawn
        from its law, or the fields themselves."""
        n = HS.shape[0]
        cols = [HS[:, l, t] for l in range(self.L) for t in range(self.r_t)]
        if self.channel is None:
            return cols
        u = np.stack([_broadcast(f, n) for f in self._forms(*cols)])
        return [self.channel.sample(u, rng, self.values)]

    def requirements(self, branch: str | None = None) -> list[tuple[str, str]]:
        """``(module, what needs it)`` of the optional packages a fit on ``branch`` imports: the exact
        solvers of :mod:`numerics.glm` (scikit-learn but for the square loss with an l2 penalty), or
        torch for the generic minimiser."""
        if self.glm is not None and "theta" not in self.pinned(branch):
            if self.glm["loss"] == "square" and self.glm["penalty"][0] == "l2":
                return []
            return [("sklearn", f"the exact {self.glm['loss']} solver of the simulator")]
        return [("torch", "the generic simulator (gradient-based minimisation of the declared risk)")]

    # ------------------------------------------------------------------ branches
    def pinned(self, branch: str | None) -> tuple[str, ...]:
        """Families pinned to zero on ``branch`` (``None``/``"free"``: none)."""
        return tuple(self.model.pinned(branch))

    def _pinned_basis(self, inst: Instance, pinned: tuple[str, ...], branch: str | None = None) -> np.ndarray | None:
        """Orthonormal basis (d, k) of the directions ``W`` must avoid on the branch."""
        vecs = units.constraint_directions(self.model, inst.Qstar, inst.gamma, branch)
        if "m" in pinned:
            vecs += [p for p in inst.P if np.any(p != 0)]
        if "theta" in pinned:
            vecs += [g * inst.Qstar[:, t] for g in inst.gamma for t in range(self.r_t)]
        if not vecs:
            return None
        U, S, _ = np.linalg.svd(np.stack(vecs, axis=1), full_matrices=False)   # rank-revealing
        keep = S > 1e-10 * max(float(S.max()), 1e-300)
        return U[:, keep] if keep.any() else None

    def initial(self, inst: Instance, pinned: tuple[str, ...], branch: str | None = None) -> np.ndarray:
        """Initial weights (d, r) on the branch: the teacher's columns where ``theta`` is free, the
        first encoding's direction (``m = O(1)``) where ``m`` is free, plus small noise. Exchangeable
        units start as their branch says (:func:`numerics.units.initial_weights`), the encoding's
        direction on every unit alike."""
        d = inst.d
        W = INIT_NOISE * inst.rng["init"].standard_normal((d, self.r))
        if self.model.unit_ansatz is not None:
            W = units.initial_weights(self.model, W, inst.Qstar if "theta" not in pinned else inst.Qstar[:, :0],
                                      branch, inst.rng["init"])
            if "m" not in pinned and self.has_encodings:
                p = next(p for p in inst.P if np.any(p != 0))
                W += (p / np.linalg.norm(p) * math.sqrt(d) * 0.5)[:, None]
            return W
        informed = False
        if "theta" not in pinned:
            k = min(self.r, self.r_t)
            W[:, :k] += inst.Qstar[:, :k]
            informed = True
        if "m" not in pinned and self.has_encodings:
            p = next(p for p in inst.P if np.any(p != 0))
            W[:, 0] += p / np.linalg.norm(p) * math.sqrt(d) * 0.5
            informed = True
        if not informed:
            W += 0.1 * inst.rng["init"].standard_normal((d, self.r))
        return W

    # ------------------------------------------------------------------ risk
    def train_loss(self, inst: Instance, W: np.ndarray) -> float:
        """``R(W) / d``: the declared loss summed over the training set plus the penalty summed over rows."""
        H = np.einsum("nld,dr->nlr", inst.inputs, W) / math.sqrt(inst.d)
        data = _broadcast(self._loss_np(*self._h_columns(H), *inst.teacher, *inst.noise), inst.n).sum()
        pen = _broadcast(self._penalty_np(*[W[:, j] for j in range(self.r)]), inst.d).sum()
        return float((data + pen) / inst.d)

    def _h_columns(self, H):
        return [H[:, l, j] for l in range(self.L) for j in range(self.r)]

    # ------------------------------------------------------------------ fit
    def fit(self, inst: Instance, branch: str | None = None, *, tol: float = DEFAULT_TOL, max_iter: int = 20000,
            device: str = "cpu", constrain: bool = True) -> Fit:
        """Minimise the risk of ``inst`` on ``branch`` (module docstring)."""
        pinned = self.pinned(branch)
        basis = self._pinned_basis(inst, pinned, branch)
        if self.glm is not None and basis is None:
            return self._fit_glm(inst)
        W0 = self.initial(inst, pinned, branch)
        notes = []
        if basis is not None and (not constrain or self.nonsmooth_penalty):
            if constrain:
                notes.append("a non-smooth penalty: the branch sets the initial weights only (no constraint)")
            W0 = W0 - basis @ (basis.T @ W0)
            basis = None
        elif basis is not None:
            W0 = W0 - basis @ (basis.T @ W0)
        fit = self._fit_torch(inst, W0, basis, tol=tol, max_iter=max_iter, device=device)
        fit.notes += notes
        return fit

    def _fit_glm(self, inst: Instance) -> Fit:
        from replica.symbolic.losses import HingeLoss, LogisticLoss

        from . import glm_solvers as glm  # the exact minimisers (numerics.glm imports this module)

        t0 = time.perf_counter()
        Xs = inst.X[:, 0, :] / math.sqrt(inst.d)
        g = self.glm
        kind, lam = g["penalty"]
        if g["loss"] == "square":
            y = _broadcast(g["target"](*inst.teacher, *inst.noise), inst.n)
            scaled = lam / g["curvature"]
            if kind == "l2":
                W, kkt, solver = glm._solve_ridge(Xs, y, scaled)
            else:
                require("sklearn", "the exact LASSO solver of the simulator")
                W, kkt, solver = glm._solve_lasso(Xs, y, scaled)
        else:
            require("sklearn", f"the exact {g['loss']} solver of the simulator")
            y = inst.teacher[0]
            solve = {LogisticLoss: glm._solve_logistic, HingeLoss: glm._solve_hinge}[type(g["factor"])]
            W, kkt, solver = solve(Xs, y, lam)
        return Fit(W=np.asarray(W, dtype=float).reshape(-1, 1), solver=f"exact {g['loss']} + {kind}: {solver}",
                   grad_norm=float(kkt), converged=bool(kkt <= KKT_TOL), iterations=0,
                   seconds=time.perf_counter() - t0)

    def _penalty_of_rows(self, r: int):
        """The declared penalty as a :class:`replica.symbolic.regularizers.SeparableRegularizer` of rows of length
        ``r`` for :class:`numerics.penalties.TheoryRegularizer`: the model's own for ``r = self.r``, its
        restriction to the first component otherwise (which the simulator uses for the proximal map of
        a penalty that is a sum of one function per component, and which a per-component l2 such as
        ``L2([lam_Q, lam_K])`` cannot give itself)."""
        from replica.symbolic.regularizers import SeparableRegularizer

        if r == self.r:
            return SeparableRegularizer(self.penalty_expr, self.w_syms)
        first = self.penalty_expr.subs({w: 0 for w in self.w_syms[1:]})
        return SeparableRegularizer(first, self.w_syms[:1])

    def _torch_loss(self, torch) -> Callable:
        if self._loss_torch is None:
            self._loss_torch = sp.lambdify(self.args, self.loss_expr, [_torch_functions(torch), "torch"],
                                           printer=_torch_printer())
        return self._loss_torch

    def _fit_torch(self, inst: Instance, W0: np.ndarray, basis: np.ndarray | None, *, tol: float, max_iter: int,
                   device: str) -> Fit:
        torch = require("torch", "the generic simulator (gradient-based minimisation of the declared risk)")
        from .penalties import TheoryRegularizer

        t0 = time.perf_counter()
        dev, dt = torch.device(device), torch.float64
        sd = math.sqrt(inst.d)
        Xp = torch.as_tensor(inst.inputs, dtype=dt, device=dev)
        teach = [torch.as_tensor(np.ascontiguousarray(c), dtype=dt, device=dev) for c in inst.teacher]
        noise = [torch.as_tensor(c, dtype=dt, device=dev) for c in inst.noise]
        B = torch.as_tensor(basis, dtype=dt, device=dev) if basis is not None else None
        reg = TheoryRegularizer(self._penalty_of_rows, self.subs, "penalty")
        lossf = self._torch_loss(torch)
        n = inst.n

        def proj(U):
            return U - B @ (B.T @ U) if B is not None else U

        def smooth(W):
            H = torch.einsum("nld,dr->nlr", Xp, W) / sd
            val = lossf(*[H[:, l, j] for l in range(self.L) for j in range(self.r)], *teach, *noise)
            data = val.sum() if isinstance(val, torch.Tensor) and val.dim() > 0 else val * n
            return data + reg.smooth(W)

        if reg.has_prox:
            W, gnorm, its = self._fista(torch, smooth, reg, torch.as_tensor(W0, dtype=dt, device=dev), sd, tol,
                                        max_iter)
            solver = "torch FISTA (proximal gradient, backtracking)"
        else:
            W, gnorm, its = self._lbfgs(torch, smooth, proj, torch.as_tensor(W0, dtype=dt, device=dev), sd, tol,
                                        max_iter)
            solver = "torch L-BFGS (strong Wolfe)" + (" on the branch's subspace" if B is not None else "")
        return Fit(W=W.detach().cpu().numpy(), solver=solver, grad_norm=gnorm, converged=bool(gnorm <= tol),
                   iterations=its, seconds=time.perf_counter() - t0)

    @staticmethod
    def _lbfgs(torch, smooth, proj, W0, sd, tol, max_iter):
        U = W0.clone().requires_grad_(True)
        opt = torch.optim.LBFGS([U], lr=1.0, max_iter=100, history_size=20, tolerance_grad=1e-300,
                                tolerance_change=1e-300, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            R = smooth(proj(U))
            R.backward()
            return R

        its, best, stall = 0, math.inf, 0
        gnorm = math.inf
        while its < max_iter:
            opt.step(closure)
            its = opt.state[opt._params[0]].get("n_iter", its + 100)
            closure()
            gnorm = float(U.grad.norm()) / sd
            if gnorm <= tol:
                break
            if gnorm >= 0.5 * best:   # no real progress: stop after a few such rounds (round-off floor)
                stall += 1
                if stall >= 4:
                    break
            else:
                stall = 0
            best = min(best, gnorm)
        return proj(U).detach(), gnorm, int(its)

    @staticmethod
    def _fista(torch, smooth, reg, W0, sd, tol, max_iter):
        def value_grad(W):
            W = W.detach().requires_grad_(True)
            f = smooth(W)
            (g,) = torch.autograd.grad(f, W)
            return float(f.detach()), g

        def total(W, f):
            return f + float(reg.nonsmooth(W))

        step, t = 1.0, 1.0
        W = W0.clone()
        fW, gW = value_grad(W)
        Y, fY, gY = W, fW, gW
        gnorm = math.inf
        its = 0
        for its in range(1, max_iter + 1):
            while True:
                Wn = reg.prox(Y - step * gY, step)
                fn, gn = value_grad(Wn)
                diff = Wn - Y
                if fn <= fY + float((gY * diff).sum()) + float((diff * diff).sum()) / (2 * step) + 1e-13 * abs(fY):
                    break
                step *= 0.5
                if step < 1e-12:
                    break
            gnorm = float(((W - reg.prox(W - step * gW, step)) / step).norm()) / sd
            if gnorm <= tol:
                break
            t_next = (1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0
            if total(Wn, fn) > total(W, fW):   # restart the momentum where it raised the objective
                t_next, Y, fY, gY = 1.0, W, fW, gW
                t = 1.0
                step *= 0.9
                continue
            Y = Wn + ((t - 1.0) / t_next) * (Wn - W)
            W, fW, gW, t = Wn, fn, gn, t_next
            fY, gY = value_grad(Y)
        return W, gnorm, its

    # ------------------------------------------------------------------ measure
    def signs(self, inst: Instance, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(W, Q*)`` with the signs the loss leaves free fixed as the theory reports them."""
        W, Qs = W.copy(), inst.Qstar.copy()
        d = inst.d
        m1 = W.T @ inst.P[0] * math.sqrt(d) / d
        th1 = (W * inst.gamma[0][:, None]).T @ Qs / d
        for g in self.student_groups:
            mg = m1[g]
            if np.max(np.abs(mg)) > 1e-9:
                s = np.sign(mg[int(np.argmax(np.abs(mg)))])
            else:
                tg = th1[g]
                s = np.sign(tg.flat[int(np.argmax(np.abs(tg)))])
            if s < 0:
                W[:, g] *= -1
                th1[g] *= -1
        for t in self.teacher_flips:
            col = th1[:, t]
            if col[int(np.argmax(np.abs(col)))] < 0:
                Qs[:, t] *= -1
        return W, Qs

    def overlaps(self, inst: Instance, W: np.ndarray) -> dict[str, np.ndarray]:
        """Per-token ``q (L, r, r), m (L, r), theta (L, r, r_t), rho (L, r_t, r_t)`` (signs fixed)."""
        W, Qs = self.signs(inst, W)
        d = inst.d
        return {"q": np.einsum("di,ld,dj->lij", W, inst.gamma, W) / d,
                "m": np.einsum("di,ld->li", W, inst.P) / math.sqrt(d),
                "theta": np.einsum("di,ld,dt->lit", W, inst.gamma, Qs) / d,
                "rho": np.einsum("dt,ld,du->ltu", Qs, inst.gamma, Qs) / d}

    def order_families(self) -> dict[str, tuple[str, ...]]:
        """The compared order-parameter quantities and the families each is built from (``V`` is not
        compared: it is a response, not a property of the weights).

        Entries: the family's name where it has a single entry (``q``, ``theta``), else the module's
        name (``m_2``, ``q_1_12``). Where the loss is rotation-invariant (:attr:`rotation_free`), the
        token-1 (slot-1) invariants instead: the eigenvalues ``q_eig1 <= q_eig2 ...`` of ``q``,
        ``theta_sq`` = ``theta^T theta`` (entries ``theta_sq_ab`` for ``r_t > 1``), ``m_sq`` = ``m^T m``
        and ``theta_m`` = ``theta^T m`` (entries ``theta_m_a``)."""
        if not self.rotation_free:
            fams = self.module.FAMILIES
            out = {}
            for name in self.module.ORDER_PARAMETERS:
                fam = self.module.LAYOUT[name][0]
                if fam != "V":
                    out[fam if len(fams[fam]) == 1 else name] = (fam,)
            return out
        rt = self.r_t
        out = {f"q_eig{k + 1}": ("q",) for k in range(self.r)}
        pairs = [(a, b) for a in range(rt) for b in range(a, rt)]
        out.update({("theta_sq" if rt == 1 else f"theta_sq_{a + 1}{b + 1}"): ("theta",) for a, b in pairs})
        out["m_sq"] = ("m",)
        out.update({("theta_m" if rt == 1 else f"theta_m_{a + 1}"): ("m", "theta") for a in range(rt)})
        return out

    def _first_matrices(self, values: Mapping[str, float | None]) -> dict[str, np.ndarray] | None:
        """Token 1's (slot 1's) ``q (r, r)``, ``m (r,)``, ``theta (r, r_t)`` from values under the
        module's names (None where one is missing)."""
        mats = {"q": np.zeros((self.r, self.r)), "m": np.zeros(self.r), "theta": np.zeros((self.r, self.r_t))}
        first = (None, 1, self.slot_labels[0])
        for name in self.module.ORDER_PARAMETERS:
            fam, token, i, j, _, _ = self.module.LAYOUT[name]
            if fam == "V" or token not in first:
                continue
            v = values.get(name)
            if v is None:
                return None
            if fam == "q":
                mats["q"][i, j] = mats["q"][j, i] = v
            elif fam == "m":
                mats["m"][i] = v
            else:
                mats["theta"][i, j] = v
        return mats

    def order_quantities(self, values: Mapping[str, float]) -> dict[str, float]:
        """The compared quantities (:meth:`order_families`) from order parameters under the module's
        names (measured ones, or the theory's ``order_parameters``)."""
        if not self.rotation_free:
            names = {fam if len(self.module.FAMILIES[fam]) == 1 else n: n for n in self.module.ORDER_PARAMETERS
                     if (fam := self.module.LAYOUT[n][0]) != "V"}
            return {k: float(values[n]) for k, n in names.items()}
        M = self._first_matrices(values)
        q, m, th = M["q"], M["m"], M["theta"]
        out = {f"q_eig{k + 1}": float(e) for k, e in enumerate(np.linalg.eigvalsh(q))}
        tt, tm = th.T @ th, th.T @ m
        rt = self.r_t
        for a in range(rt):
            for b in range(a, rt):
                out["theta_sq" if rt == 1 else f"theta_sq_{a + 1}{b + 1}"] = float(tt[a, b])
            out["theta_m" if rt == 1 else f"theta_m_{a + 1}"] = float(tm[a])
        out["m_sq"] = float(m @ m)
        return out

    def order_quantity_errors(self, values: Mapping[str, float], errors: Mapping[str, float | None]
                              ) -> dict[str, float | None]:
        """Error bars of :meth:`order_quantities` from those of the order parameters: the entries' own,
        or for the invariants first-order bounds (an eigenvalue moves by at most the Frobenius norm of
        ``dq`` (Weyl); ``|d(a^T b)| <= |a| |db| + |da| |b|``); None where an entry has none."""
        if not self.rotation_free:
            names = {fam if len(self.module.FAMILIES[fam]) == 1 else n: n for n in self.module.ORDER_PARAMETERS
                     if (fam := self.module.LAYOUT[n][0]) != "V"}
            return {k: errors.get(n) for k, n in names.items()}
        M, E = self._first_matrices(values), self._first_matrices(errors)
        out: dict[str, float | None] = dict.fromkeys(self.order_families())
        if E is None:
            return out
        q, m, th = M["q"], M["m"], M["theta"]
        dq, dm, dth = np.abs(E["q"]), np.abs(E["m"]), np.abs(E["theta"])
        for k in range(self.r):
            out[f"q_eig{k + 1}"] = float(np.linalg.norm(dq))
        rt = self.r_t
        n = np.linalg.norm
        for a in range(rt):
            for b in range(a, rt):
                out["theta_sq" if rt == 1 else f"theta_sq_{a + 1}{b + 1}"] = float(
                    n(th[:, a]) * n(dth[:, b]) + n(dth[:, a]) * n(th[:, b]))
            out["theta_m" if rt == 1 else f"theta_m_{a + 1}"] = float(n(th[:, a]) * n(dm) + n(dth[:, a]) * n(m))
        out["m_sq"] = float(2 * n(m) * n(dm))
        return out

    def order_values(self, ov: Mapping[str, np.ndarray]) -> dict[str, float]:
        """The measured order parameters under the module's names (``q_1``, ``theta``, ``m_2`` ...)."""
        out = {}
        for name in self.module.ORDER_PARAMETERS:
            fam, token, i, j, _, _ = self.module.LAYOUT[name]
            if fam == "V":
                continue
            t = 0 if token is None else (self.slot_labels.index(token) if isinstance(token, str) else int(token) - 1)
            out[name] = float(ov[fam][t][i] if fam == "m" else ov[fam][t][i, j])
        return out

    def test_fields(self, ov: Mapping[str, np.ndarray], n_test: int, rng: np.random.Generator) -> tuple:
        """``n_test`` fresh test samples' student and teacher fields (n, L, r), (n, L, r_t) and their
        tokens' slots (n, L), drawn from their exact law given ``W``: the label configuration from the
        label law, then per token jointly Gaussian with means ``(m_s, 0)`` and covariance
        ``[[q_s, theta_s], [theta_s^T, rho_s]]`` of its slot ``s``; tokens independent given the labels."""
        r, rt = self.r, self.r_t
        slot = self.data.sample_slots(n_test, rng, self.values)
        H = np.empty((n_test, self.L, r))
        HS = np.empty((n_test, self.L, rt))
        for l in range(self.L):
            for s in np.unique(slot[:, l]):
                rows = slot[:, l] == s
                C = np.block([[ov["q"][s], ov["theta"][s]], [ov["theta"][s].T, ov["rho"][s]]])
                e, V = np.linalg.eigh(C)
                F = V * np.sqrt(np.clip(e, 0.0, None))
                Z = rng.standard_normal((int(rows.sum()), r + rt)) @ F.T
                H[rows, l] = Z[:, :r] + ov["m"][s][None, :]
                HS[rows, l] = Z[:, r:]
        return H, HS, slot

    def measure(self, inst: Instance, fit: Fit, n_test: int = 100_000, branch: str | None = None) -> dict[str, Any]:
        """Order parameters, the training loss and every observable at ``fit.W`` (module docstring);
        exchangeable units matched to the theory as ``branch`` says (:mod:`numerics.units`)."""
        W = fit.W
        if units.matching(self.model, branch) == "permutation":
            th = self.overlaps(inst, W)["theta"].sum(axis=0)
            W = W[:, units.best_permutation(th, self.model)]
        ov = self.overlaps(inst, W)
        out: dict[str, Any] = {}
        orders = (units.orbit_values(self.model, self.module, ov, branch) if self.model.unit_ansatz is not None
                  else self.order_values(ov))
        out.update(self.order_quantities(orders))
        rng = inst.rng["test"]
        H, HS, slot = self.test_fields(ov, n_test, rng)
        teacher = self._teacher_args(HS, rng)
        noise = [rng.standard_normal(n_test) for _ in self.noise_syms] + self.label_columns(slot)
        hcols = self._h_columns(H)
        state = self._state_observables(orders)
        for o in self.observables:
            if o.kind == "test":
                out[o.name] = float(_broadcast(self._test_obs[o.name](*hcols, *teacher, *noise), n_test).mean())
            elif o.kind == "entropic":
                f = self._entropic_obs[o.name]
                out[o.name] = float(_broadcast(f(*[fit.W[:, j] for j in range(self.r)]), inst.d).mean())
            else:
                out[o.name] = state.get(o.name, math.nan)
        out["train_loss"] = self.train_loss(inst, fit.W)
        return out

    def _state_observables(self, orders: Mapping[str, float]) -> dict[str, float]:
        """State observables at the measured order parameters; NaN for one that needs ``V`` (not
        measurable from the weights)."""
        names = tuple(self.module.STATE_OBSERVABLES)
        if not names:
            return {}
        p = np.array([self.values[k] for k in self.module.PARAMETERS], dtype=float)

        def at(v_fill: float) -> np.ndarray:
            x = np.array([orders.get(k, v_fill) for k in self.module.ORDER_PARAMETERS], dtype=float)
            with np.errstate(all="ignore"):
                return np.atleast_1d(np.asarray(self.module.state_observables(x, p), dtype=float))

        a, b = at(1.0), at(2.0)
        return {k: (float(x) if x == y else math.nan) for k, x, y in zip(names, a, b)}

    # ------------------------------------------------------------------ one run
    def run(self, alpha: float, d: int, seed: int, branch: str | None = None, *, n_test: int = 100_000,
            tol: float = DEFAULT_TOL, max_iter: int = 20000, device: str = "cpu", constrain: bool = True
            ) -> dict[str, Any]:
        """One seed at one dimension: draw, fit, measure. Returns the measured quantities and the fit's
        diagnostics (``solver``, ``grad_norm``, ``converged``, ``iterations``, ``seconds``)."""
        t0 = time.perf_counter()
        inst = self.instance(alpha, d, seed)
        fit = self.fit(inst, branch, tol=tol, max_iter=max_iter, device=device, constrain=constrain)
        values = self.measure(inst, fit, n_test, branch)
        return {"d": d, "seed": seed, "n": inst.n, "values": values, "solver": fit.solver,
                "grad_norm": fit.grad_norm, "converged": fit.converged, "iterations": fit.iterations,
                "notes": fit.notes, "seconds": time.perf_counter() - t0}
