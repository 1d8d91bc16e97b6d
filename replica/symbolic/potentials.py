"""The three potentials of the replica-symmetric free entropy (docs/explanation/theory.md §3).

``Phi = extr [ trace_potential + entropic_potential + alpha * energetic_potential ]``

* :func:`trace_potential` -- the bilinear couplings ``Psi_t``;
* :func:`entropic_potential` -- ``Psi_w``, closed form for a quadratic regularizer,
  otherwise a :class:`GaussianMoreauEnvelope`;
* :func:`energetic_potential` -- ``Psi_y``, always a :class:`GaussianMoreauEnvelope`
  whose bracket ``F(h; omega, h*, V)`` stays symbolic.

Square roots of ``q`` are Cholesky factors (:func:`replica.symbolic.symbols.cholesky_lower`):
``omega_l = m_l + C_l xi_l`` with ``C_l C_l^T = q_l`` and
``h*_l = theta_l^T C_l^{-T} xi_l + D_l eta_l`` with ``D_l D_l^T = rho_l - theta_l^T q_l^{-1} theta_l``.
Any factor with ``C C^T = q`` gives the same joint law of ``(omega_l - m_l, h*_l)``
(covariance ``[[q, theta], [theta^T, rho]]``), so the potential is unchanged; the
Cholesky entries are explicit nested square roots that sympy differentiates in a few
milliseconds for ``r = 2, 3``, whereas the symmetric root ``q^{1/2}`` would need an
eigen-decomposition whose derivative is intractable. The Stein (Gaussian
integration-by-parts) form would avoid square roots altogether but needs the
Jacobian of the proximal map at every node; the Cholesky form needs only the
bracket's derivatives at the minimiser (envelope theorem), which is what the
generated solver evaluates.

Token clusters (docs/explanation/theory.md §8): the trace and entropic potentials run over the slots
``s = (l, c)`` (one overlap, one delta function per slot); the energetic bracket is written
for one label configuration with every token's parameters the one-hot combinations
``x_l = sum_c e_{lc} x_{lc}`` (:func:`token_view`), and the label indicators ``e`` are extra
*discrete* variables of the average (:attr:`GaussianMoreauEnvelope.discrete`), summed over
the configurations with their probabilities. By the chain rule ``dF/dx_{lc} = e_{lc} dF/dx_l``:
a slot's gradient collects the configurations where the token sits in that cluster.

Teacher channels (:mod:`replica.symbolic.channels`): the label is a discrete function of the teacher,
so the teacher leaves the integrand. Given the student's Gaussians ``xi`` the channel's forms are
Gaussian (:func:`replica.symbolic.channels.conditional_law` of the Cholesky laws above), the residual
``eta`` is integrated out in closed form, and the envelope is

    Psi_y = - E_xi sum_y W(y | xi; x) min_h F(h; omega, y),    W = Z(y | mu(xi), C)

with the label ``y`` a discrete variable of the average (:attr:`GaussianMoreauEnvelope.label`,
summed over :attr:`~GaussianMoreauEnvelope.label_values` with weight one, ``W`` carrying its law).
The minimiser does not depend on ``W > 0``, so the envelope theorem gives
``dPsi_y/dx = -E sum_y d(W F)/dx`` at fixed ``h`` (:meth:`GaussianMoreauEnvelope.parameter_gradient`):
the derivative falls on the smooth weight, never on the label.

Non-smooth losses (:mod:`replica.symbolic.losses`): the bracket keeps its flat ``Piecewise``; its structure
(branches, breakpoints) is :attr:`GaussianMoreauEnvelope.pieces`, used by the exact piecewise prox.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from .channels import conditional_law
from ..errors import DeclarationError
from .losses import PiecewiseStructure, analyse, flat_piecewise
from .model import Model
from .order_parameters import OrderParameters
from .regularizers import L2, SeparableRegularizer
from .symbols import cholesky_lower, symbol
from .unit_matrices import teacher_law, unit_matrix


@dataclass
class GaussianMoreauEnvelope:
    """``Psi = - E_{z ~ N(0, I)} min_x B(x; z)``, kept structured.

    Attributes
    ----------
    variables:
        The minimisation variables ``x`` (flattened), e.g. the ``L r`` student fields.
    gaussians:
        The standard Gaussian variables ``z`` of the average.
    bracket:
        ``B`` written with intermediate symbols (e.g. ``omega_l``, ``h*_l``).
    intermediates:
        Intermediate symbol -> its expression in ``z`` and the order parameters.
    starts:
        Starting points of the inner minimisation (lists of expressions, one per variable).
    discrete:
        Discrete variables of the average after the Gaussians (one-hot label indicators of a
        model with token clusters; their law is the data's label law), else empty.
    weight:
        A teacher channel's label law ``W(y | z; x)`` (an expression of the Gaussians, the order
        parameters and the label), which multiplies the minimum; ``None`` without a channel.
    label, label_values:
        The channel's label symbol (a discrete variable of the average after ``discrete``) and
        the values it takes (summed with unit weight: ``weight`` is the law).
    transitions:
        For a one-dimensional ``z``: ``(centre, width)`` of every place where ``weight`` changes
        (in ``z``, as expressions of the order parameters), for quadrature placement.
    pieces:
        The piecewise structure of a non-smooth loss in the (one) minimisation variable, else None.
    """

    name: str
    variables: list[sp.Symbol]
    gaussians: list[sp.Symbol]
    bracket: sp.Expr
    intermediates: dict[sp.Symbol, sp.Expr]
    starts: list[list[sp.Expr]] = field(default_factory=list)
    discrete: list[sp.Symbol] = field(default_factory=list, kw_only=True)
    weight: sp.Expr | None = field(default=None, kw_only=True)
    label: sp.Symbol | None = field(default=None, kw_only=True)
    label_values: tuple = field(default=(), kw_only=True)
    transitions: list = field(default_factory=list, kw_only=True)
    pieces: PiecewiseStructure | None = field(default=None, kw_only=True)

    @property
    def full_bracket(self) -> sp.Expr:
        """``B(x; z, order parameters)`` with every intermediate substituted."""
        return self.bracket.subs(self.intermediates)

    @property
    def weighted_bracket(self) -> sp.Expr:
        """``W B`` (``B`` without a channel): the integrand whose minimum over ``x`` is averaged."""
        B = self.full_bracket
        return B if self.weight is None else self.weight * B

    def gradient(self) -> list[sp.Expr]:
        """``dB/dx`` (for the proximal solver)."""
        B = self.full_bracket
        return [sp.diff(B, x) for x in self.variables]

    def hessian(self) -> list[list[sp.Expr]]:
        """``d^2 B / dx dx`` (for Newton steps)."""
        g = self.gradient()
        return [[sp.diff(gi, x) for x in self.variables] for gi in g]

    def parameter_gradient(self, parameters: list[sp.Symbol]) -> list[sp.Expr]:
        """``dB/dp`` at fixed ``x``: by the envelope theorem ``dPsi/dp = -E[dB/dp at x = argmin]``.

        The chain rule through the intermediates is left to sympy:
        ``dB/dp = sum_k dB/du_k du_k/dp + (explicit dB/dp)``. With a channel the derivative is that
        of ``W B`` (the weight does not depend on ``x``, so the minimiser is that of ``B``).
        """
        B = kinked_labels_as_max(self.weighted_bracket, self.variables)
        return [max_as_abs(sp.diff(B, p)) for p in parameters]


def kinked_labels_as_max(expr: sp.Expr, variables) -> sp.Expr:
    """``expr`` with every ``|u|`` free of ``variables`` (a kinked label) written ``max(u, -u)``: sympy
    differentiates the ``Abs`` of an expression it cannot prove real (``sqrt(rho - theta^2/q)`` ...)
    through its real and imaginary parts, ``max`` to a step function."""
    inner = set(variables)
    return sp.sympify(expr).replace(lambda e: isinstance(e, sp.Abs) and not (e.free_symbols & inner),
                                    lambda e: sp.Max(e.args[0], -e.args[0]))


def max_as_abs(expr: sp.Expr) -> sp.Expr:
    """``expr`` with every ``max(u, -u)`` that differentiation left as a factor written ``|u|`` again
    (the inverse of :func:`kinked_labels_as_max` where no derivative was taken: same values, the
    notation a reader expects)."""
    return sp.sympify(expr).replace(lambda e: isinstance(e, sp.Max) and len(e.args) == 2 and e.args[0] == -e.args[1],
                                    lambda e: sp.Abs(e.args[0]))


def trace_potential(ops: OrderParameters) -> sp.Expr:
    """``Psi_t = sum_s [1/2 tr(Vhat_s q_s) - 1/2 tr(qhat_s V_s) - mhat_s^T m_s - tr(thetahat_s^T theta_s)]``
    over the slots ``s`` (the tokens without clusters)."""
    total = sp.Integer(0)
    for l in range(ops.S):
        q, V, m, th = (ops.slot(f, l) for f in ("q", "V", "m", "theta"))
        qh, Vh, mh, thh = (ops.slot(f, l) for f in ("qhat", "Vhat", "mhat", "thetahat"))
        total += (Vh * q).trace() / 2 - (qh * V).trace() / 2 - (mh.T * m)[0, 0] - (thh.T * th).trace()
    return sp.expand(total)


def entropic_matrices(model: Model, ops: OrderParameters, group) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix, sp.Matrix]:
    """``(A, B, b_mean_outer, Gamma)`` of one spectral group (docs/explanation/theory.md §3).

    ``A = sum_l gamma_l Vhat_l``, ``B = sum_l gamma_l qhat_l``,
    ``E[mu mu^T]`` with ``mu = sum_l pi_l mhat_l``, and ``Gamma = sum_l gamma_l thetahat_l``
    so that ``b = mu + Gamma tau``.
    """
    r = model.r
    A, B, Gam = sp.zeros(r, r), sp.zeros(r, r), sp.zeros(r, model.r_t)
    MM = sp.zeros(r, r)
    for l in range(ops.S):  # slots (tokens without clusters)
        g = sp.sympify(group.gamma[l])
        A += g * ops.slot("Vhat", l)
        B += g * ops.slot("qhat", l)
        Gam += g * ops.slot("thetahat", l)
        for k in range(ops.S):
            MM += group.pi_moment[l, k] * ops.slot("mhat", l) * ops.slot("mhat", k).T
    return A, B, MM, Gam


def entropic_potential(model: Model, ops: OrderParameters) -> sp.Expr | GaussianMoreauEnvelope:
    """``Psi_w``: closed form ``1/2 E_nu tr[(Lambda + A)^{-1}(B + b b^T)]`` for a quadratic regularizer.

    The average over ``tau ~ N(0, I)`` is exact: ``E[b b^T] = E[mu mu^T] + Gamma Gamma^T``.
    """
    reg = model.regularizer
    if isinstance(reg, L2):
        Lam = reg.matrix(model.r)
        total = sp.Integer(0)
        for group in model.data.second_moment_groups():
            A, B, MM, Gam = entropic_matrices(model, ops, group)
            M = Lam + A
            X = group.weight * (B + Gam * Gam.T) + MM
            uM = unit_matrix(M) if ops.units is not None else None
            if uM is not None:  # tr[(a I + b J) X] = a tr X + b 1^T X 1
                Minv = uM.inverse()
                total += (Minv.a * X.trace() + Minv.b * sp.Add(*X)) / 2
                continue
            Minv = M.inv() if model.r > 1 else sp.Matrix([[1 / M[0, 0]]])
            total += (Minv * X).trace() / 2
        return total
    if isinstance(reg, SeparableRegularizer):
        return entropic_envelope(model, ops)
    raise DeclarationError(f"regularizer: {type(reg).__name__} is neither quadratic nor separable")


@dataclass
class EntropicEnvelope(GaussianMoreauEnvelope):
    """``Psi_w = -E_{xi, tau} sum_k w_k min_w [r(w) + 1/2 w^T A_k w - w^T (b_k + B_k^{1/2} xi)]``.

    One block of variables ``w_k`` per atom ``k`` of the spectral law (the minimum of a
    sum of independent brackets is the sum of their minima, so the average of the sum is
    the sum of the atoms' potentials). ``argmin`` holds the closed-form minimisers when
    sympy found the proximal map of the regularizer, else ``None`` (numeric Newton).
    """

    argmin: list[sp.Expr] | None = None
    validity: dict[str, sp.Expr] = field(default_factory=dict)
    #: per atom, ``A_k = sum_l gamma_l Vhat_l`` (``r = 1``: the bracket's curvature besides ``r``)
    curvatures: list[sp.Expr] = field(default_factory=list)


def entropic_envelope(model: Model, ops: OrderParameters) -> EntropicEnvelope:
    """The entropic Moreau envelope of a general separable regularizer (docs/explanation/theory.md §3)."""
    reg = model.regularizer
    r, rt = model.r, model.r_t
    xi = [symbol(f"xiw_{i + 1}", rf"\xi^{{w}}_{{{i + 1}}}") for i in range(r)]
    tau = [symbol(f"tau_{i + 1}", rf"\tau_{{{i + 1}}}") for i in range(rt)]
    variables, intermediates, argmin, validity = [], {}, [], {}
    bracket = sp.Integer(0)
    closed = True
    curvatures: list = []
    for k, atom in enumerate(model.data.atoms):
        A, B, Gam = sp.zeros(r, r), sp.zeros(r, r), sp.zeros(r, rt)
        mu = sp.zeros(r, 1)
        for l in range(ops.S):  # slots (tokens without clusters)
            g = sp.sympify(atom.gamma[l])
            A += g * ops.slot("Vhat", l)
            B += g * ops.slot("qhat", l)
            Gam += g * ops.slot("thetahat", l)
            mu += sp.sympify(atom.pi[l]) * ops.slot("mhat", l)
        C = cholesky_lower(B)
        field_k = mu + Gam * sp.Matrix(tau) + C * sp.Matrix(xi)
        w_k = [symbol(f"w_{k + 1}_{i + 1}" if r > 1 else f"w_{k + 1}", rf"w_{{{k + 1},{i + 1}}}") for i in range(r)]
        Zs = [symbol(f"Zw_{k + 1}_{i + 1}" if r > 1 else f"Zw_{k + 1}",
                     rf"Z_{{{k + 1},{i + 1}}}" if r > 1 else rf"Z_{{{k + 1}}}") for i in range(r)]
        for Zi, e in zip(Zs, field_k):
            intermediates[Zi] = e
        wv = sp.Matrix(w_k)
        term = reg.expression(wv) + (wv.T * A * wv)[0, 0] / 2 - (wv.T * sp.Matrix(Zs))[0, 0]
        bracket += sp.sympify(atom.weight) * term
        variables += w_k
        curvatures.append(A[0, 0] if r == 1 else A)
        if r == 1:
            sol = reg.scalar_prox(Zs[0] / A[0, 0], 1 / A[0, 0])
            if sol is None:
                closed = False
            else:
                argmin.append(sol)
        else:
            closed = False
        # The bracket is bounded below iff A plus the quadratic growth of r is positive
        # definite: lam2 for an elastic net, 0 for l1 or any penalty of linear growth.
        Ag = A + sp.diag(*_quadratic_growth(reg, r))
        for i in range(1, r + 1):
            validity[f"sum_l gamma_l qhat_l (minor {i}) [atom {k + 1}]"] = B[:i, :i].det() if i > 1 else B[0, 0]
            validity[f"sum_l gamma_l Vhat_l + r'' at infinity (minor {i}) [atom {k + 1}]"] = \
                Ag[:i, :i].det() if i > 1 else Ag[0, 0]
    starts = [[Zi for Zi in intermediates]]  # w = Z (a bounded, admissible point) if Newton is needed
    return EntropicEnvelope("entropic", variables, xi + tau, bracket, intermediates, starts,
                            argmin if closed else None, validity, curvatures)


def _quadratic_growth(reg: SeparableRegularizer, r: int) -> list[sp.Expr]:
    """``2 lim_{w_i -> oo} r(w) / w_i^2`` per coordinate (the curvature ``r`` keeps at infinity)."""
    out = []
    for i, wi in enumerate(reg.w):
        others = {wj: 0 for j, wj in enumerate(reg.w) if j != i}
        try:
            c = 2 * sp.limit(sp.sympify(reg.expr).subs(others) / wi ** 2, wi, sp.oo)
        except (NotImplementedError, ValueError):
            c = sp.Integer(0)
        out.append(c if c.is_finite is not False else sp.Integer(0))
    return out + [sp.Integer(0)] * (r - len(out))


def prox_center_symbols(model: Model) -> sp.Matrix:
    """Symbols ``omega_{l,k}`` for the centres of the energetic Moreau envelope."""
    L, r = model.L, model.r
    return sp.Matrix(L, r, lambda l, k: symbol(f"center_{l + 1}" if r == 1 else f"center_{l + 1}_{k + 1}",
                                               rf"\omega_{{{l + 1}}}" if r == 1 else rf"\omega_{{{l + 1},{k + 1}}}"))


def gaussian_symbols(model: Model) -> tuple[sp.Matrix, sp.Matrix]:
    """Standard Gaussians ``xi`` (``L x r``) and ``eta`` (``L x r_t``) of the energetic average."""
    L, r, rt = model.L, model.r, model.r_t
    xi = sp.Matrix(L, r, lambda l, k: symbol(f"xi_{l + 1}" if r == 1 else f"xi_{l + 1}_{k + 1}",
                                             rf"\xi_{{{l + 1}}}" if r == 1 else rf"\xi_{{{l + 1},{k + 1}}}"))
    eta = sp.Matrix(L, rt, lambda l, k: symbol(f"eta_{l + 1}" if rt == 1 else f"eta_{l + 1}_{k + 1}",
                                               rf"\eta_{{{l + 1}}}" if rt == 1 else rf"\eta_{{{l + 1},{k + 1}}}"))
    return xi, eta


def token_view(model: Model, ops: OrderParameters, family: str, l: int) -> sp.Matrix:
    """Token ``l``'s parameter of ``family`` in the energetic bracket: its slot's matrix, or
    with token clusters ``sum_c e_{lc} x_{lc}`` (one-hot label indicators ``e``)."""
    data = model.data
    return data.token_combination(l, [ops.slot(family, s) for s in data.token_slots(l)])


def field_laws(model: Model, ops: OrderParameters) -> dict[sp.Symbol, sp.Expr]:
    """``omega_l`` and ``h*_l`` as functions of ``(xi, eta)`` and the order parameters (Cholesky form)."""
    centers = prox_center_symbols(model)
    xi, eta = gaussian_symbols(model)
    out: dict[sp.Symbol, sp.Expr] = {}
    for l in range(model.L):
        q, m, th = (token_view(model, ops, f, l) for f in ("q", "m", "theta"))
        rho = model.data.token_rho(l, model.r_t)
        closed = teacher_law(q, th, rho) if ops.units is not None else None
        if closed is not None:  # the unit-symmetric ansatz: symmetric roots in closed form
            S, A, resid = closed
            omega_l = [m[k] + e for k, e in enumerate(S.apply(list(xi[l, :])))]
            hstar_l = ([a + b for a, b in zip(A.apply(list(xi[l, :])), resid.sqrt().apply(list(eta[l, :])))]
                       if A is not None else [])
            out.update(zip(centers[l, :], omega_l))
            out.update(zip(model.hstar[l, :], hstar_l))
            continue
        C = cholesky_lower(q)
        Cinv = C.inv() if model.r > 1 else sp.Matrix([[1 / C[0, 0]]])
        qinv = q.inv() if model.r > 1 else sp.Matrix([[1 / q[0, 0]]])
        residual = rho - th.T * qinv * th
        D = cholesky_lower(residual)
        omega_l = m + C * xi[l, :].T
        hstar_l = th.T * Cinv.T * xi[l, :].T + D * eta[l, :].T
        for k in range(model.r):
            out[centers[l, k]] = omega_l[k]
        for k in range(model.r_t):
            out[model.hstar[l, k]] = hstar_l[k]
    return out


def energetic_potential(model: Model, ops: OrderParameters) -> GaussianMoreauEnvelope:
    """``Psi_y = - E_{xi, eta} min_h [ sum_l 1/2 (h_l - omega_l)^T V_l^{-1} (h_l - omega_l) + l(h, h*) ]``,
    or with a channel ``- E_xi sum_y W(y | xi) min_h [ ... + l(h, y) ]`` (module docstring)."""
    centers = prox_center_symbols(model)
    xi, eta = gaussian_symbols(model)
    quad = sp.Integer(0)
    for l in range(model.L):
        V = token_view(model, ops, "V", l)
        dev = model.h[l, :].T - centers[l, :].T
        uV = unit_matrix(V) if ops.units is not None else None
        if uV is not None:  # the unit-symmetric ansatz: V^{-1} in closed form
            quad += uV.inverse().quadratic_form(list(dev)) / 2
            continue
        Vinv = V.inv() if model.r > 1 else sp.Matrix([[1 / V[0, 0]]])
        quad += (dev.T * Vinv * dev)[0, 0] / 2
    variables = list(model.h)
    laws = field_laws(model, ops)
    pieces = None
    loss = model.loss
    if len(variables) == 1:
        teacher = set(model.hstar) | set(model.noise)
        discrete = set(model.data.label_symbols) | ({model.channel.label} if model.channel is not None else set())
        pieces = analyse(loss, variables[0], teacher=teacher, discrete=discrete)
        if pieces is not None:
            loss = pieces.expr
    bracket = quad + loss
    omega = list(centers)
    starts = [omega, [sp.Integer(0)] * len(variables), [-w for w in omega]]
    if pieces is not None:
        # the breakpoints of the loss, after the bracket's quad part: kept inside the Piecewise
        pieces = PiecewiseStructure(pieces.variable, flat_piecewise(bracket, pieces.variable), [quad + b for b in pieces.branches],
                                    pieces.conditions, pieces.breakpoints)
    ch = model.channel
    if ch is None:
        gaussians = list(xi) + list(eta) + list(model.noise)
        return GaussianMoreauEnvelope("energetic", variables, gaussians, bracket, laws, starts,
                                      discrete=list(model.data.label_symbols), pieces=pieces)
    # the teacher in the measure: the residual eta is integrated out into the channel's label law
    teacher_laws = {s: laws[s] for s in model.hstar}
    mean, cov = conditional_law(ch.forms, teacher_laws, list(eta))
    weight = ch.likelihood(ch.label, mean, cov)
    transitions = []
    if len(xi) == 1:
        z = xi[0]
        for centre, k, extra in ch.transitions():
            # k: a form index, or a pair (i, j) for the difference u_i - u_j (an argmax)
            a = ([sp.Integer(int(n == k[0]) - int(n == k[1])) for n in range(len(mean))] if isinstance(k, tuple)
                 else [sp.Integer(int(n == k)) for n in range(len(mean))])
            mu = sp.expand(sum(ai * mi for ai, mi in zip(a, mean)))
            var = sum(a[i] * a[j] * cov[i, j] for i in range(len(a)) for j in range(len(a)))
            slope = sp.diff(mu, z)
            transitions.append(((centre - mu.subs(z, 0)) / slope, sp.sqrt(var + extra) / sp.Abs(slope)))
    intermediates = {c: laws[c] for c in centers}
    gaussians = list(xi) + list(model.noise)
    return GaussianMoreauEnvelope("energetic", variables, gaussians, bracket, intermediates, starts,
                                  discrete=list(model.data.label_symbols), weight=weight, label=ch.label,
                                  label_values=tuple(ch.values), transitions=transitions, pieces=pieces)


def validity_conditions(model: Model, ops: OrderParameters) -> dict[str, sp.Expr]:
    """Quantities that must be positive for a state to be admissible.

    Leading principal minors of ``q_s``, ``V_s`` and ``rho_s - theta_s^T q_s^{-1} theta_s``
    (Sylvester's criterion) for every slot ``s`` (token), keyed by a readable name used in
    error messages.
    """
    out: dict[str, sp.Expr] = {}
    seen: set = set()
    data = model.data
    for l in range(ops.S):
        q, V, th = ops.slot("q", l), ops.slot("V", l), ops.slot("theta", l)
        where = f"slot {data.slot_label(l)}" if data.has_clusters else f"token {l + 1}"
        closed = teacher_law(q, th, data.rho(l, model.r_t)) if ops.units is not None else None
        uV = unit_matrix(V) if ops.units is not None else None
        if closed is not None and uV is not None:
            # a I + b J is positive definite iff a > 0 and a + n b > 0 (its two eigenvalues)
            mats = [(unit_matrix(q), "q"), (uV, "V")]
            if closed[2] is not None:
                mats.append((closed[2], "rho - theta^T q^-1 theta"))
            for U, nm in mats:
                for k, ev in enumerate(U.eigenvalues()[: 1 if U.n == 1 else 2]):
                    label = nm if U.n == 1 else f"{nm} ({'eigenvalue along 1' if k else 'eigenvalue across 1'})"
                    out[f"{label} [{where}]"] = ev
            continue
        qinv = q.inv() if model.r > 1 else sp.Matrix([[1 / q[0, 0]]])
        res = data.rho(l, model.r_t) - th.T * qinv * th
        for M, nm in ((q, "q"), (V, "V"), (res, "rho - theta^T q^-1 theta")):
            for k in range(1, M.shape[0] + 1):
                minor = M[:k, :k].det() if k > 1 else M[0, 0]
                key = sp.srepr(minor)
                if key in seen:
                    continue
                seen.add(key)
                label = nm if M.shape[0] == 1 else f"{nm} (minor {k})"
                out[f"{label} [{where}]"] = minor
    return out
