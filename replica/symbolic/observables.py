"""What a model reports besides its order parameters and free entropy: observables as declarations.

A model lists its observables (``Model(observables=[...])``); code generation, the solver
(:attr:`replica.numeric.solver.FixedPoint.observables`), the JSON of ``replica solve`` and ``replica
phase``, and the LaTeX export pick every one of them up by name, with no per-observable code.

Three kinds, after where their value lives in the replica computation:

* :class:`TestObservable` -- a *test-point* average ``E f(h, h*, z)``: ``h`` are the student's
  fields at a fresh test sample, which at the saddle point have the law of the prox centres
  ``omega = m + q^{1/2} xi`` (no proximal step), ``h*`` the teacher's fields correlated with
  them, ``z`` the label noise and cluster labels of the model. Written with the model's own
  symbols ``h``, ``hstar``, ``noise`` (and parameters). The test loss ``eps_g`` (the training
  loss evaluated at the test point) is always reported and comes first; declaring a
  :class:`TestObservable` named ``eps_g`` replaces its expression (e.g. a test MSE that differs
  from the training loss). Further examples: a classification error ``Heaviside(-y h)`` with a
  label ``y`` of ``h*`` and the noise.
* :class:`EntropicObservable` -- an average over the *entropic* side ``E g(w)`` of an expression
  of one weight row ``w`` at the entropic proximal map (e.g. the fraction of zero weights of an
  l1 penalty, ``Eq(w, 0)``), summed over the atoms of the spectral law with their weights. It
  needs the entropic prox, i.e. a non-quadratic regularizer (:class:`~replica.symbolic.regularizers.
  SeparableRegularizer`); with an l2 penalty the entropic side is solved in closed form and the
  declaration is refused with a message saying so.
* :class:`StateObservable` -- a function of the order parameters themselves (no average), e.g. the
  angle ``acos(theta / sqrt(q rho))`` between student and teacher; written with symbols named like
  the order parameters (``q``, ``theta``, ``V``, ``m``, ``q_1`` ... as in ``ORDER_PARAMETERS``).

With a teacher channel (:mod:`replica.symbolic.channels`) a test-point observable is written in ``h`` and
the channel's label ``y`` (the teacher is in the measure): e.g. the classification error
``Heaviside(-y h)``, whose average is ``P(y != sign h)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Sequence

import sympy as sp

from ..errors import DeclarationError
from .symbols import symbol

#: the observable every model reports (the test loss)
TEST_LOSS = "eps_g"


@dataclass(frozen=True)
class Observable:
    """A named quantity the model reports at every fixed point.

    ``expr`` is a sympy expression (see the subclasses for its variables), ``latex`` how its
    name reads in exported documents (default: the name), ``description`` one line for users.
    """

    name: str
    expr: sp.Expr
    latex: str | None = None
    description: str = ""
    kind: ClassVar[str] = "abstract"
    #: supplied by the toolkit (the default test loss), not declared: rebuilt from the loss
    implicit: bool = field(default=False, repr=False, compare=False, kw_only=True)

    def validate(self) -> None:
        """Reject names that cannot be JSON keys and generated identifiers at once."""
        if not self.name.isidentifier() or self.name.startswith("_"):
            raise DeclarationError(f"observables: name {self.name!r} must be an identifier not starting with '_'")

    @property
    def tex_name(self) -> str:
        """The observable's name in LaTeX."""
        return self.latex or rf"\mathrm{{{self.name.replace('_', chr(92) + '_')}}}"


@dataclass(frozen=True)
class TestObservable(Observable):
    """``E f(h, h*, z)`` at the test point (no proximal step): ``h`` has the law of the prox
    centres ``omega``, jointly Gaussian with ``h*`` (see the module docstring)."""

    kind: ClassVar[str] = "test"
    __test__: ClassVar[bool] = False  # not a pytest test class


@dataclass(frozen=True)
class EntropicObservable(Observable):
    """``E g(w)`` at the entropic proximal map; ``w`` are the symbols of one weight row that
    ``expr`` is written in (``r`` of them)."""

    w: Sequence[sp.Symbol] = field(default_factory=tuple)
    kind: ClassVar[str] = "entropic"


@dataclass(frozen=True)
class StateObservable(Observable):
    """``f(x)`` of the order parameters ``x`` (by their symbols' names) and the parameters."""

    kind: ClassVar[str] = "state"


def classification_error(label: sp.Symbol, field: sp.Symbol,
                         description: str = "P(y != sign h) at a fresh sample") -> TestObservable:
    """The 0-1 test error of a label ``y = +-1`` predicted by ``sign(h)``: ``Heaviside(-y h)`` at a fresh
    sample (averaged by the generic machinery: for a sign teacher it comes out as
    ``arccos(theta / sqrt(q rho)) / pi``, never typed in)."""
    return TestObservable("classification_error", sp.Heaviside(-label * field), r"\varepsilon_{01}", description)


def student_teacher_angle(rho: sp.Expr = 1) -> StateObservable:
    """The angle between student and teacher weights, ``acos(theta / sqrt(q rho))`` (one token, rank
    one: the order parameters by their family names)."""
    q, theta = symbol("q"), symbol("theta", r"\theta")
    return StateObservable("angle", sp.acos(theta / sp.sqrt(q * rho)), r"\angle(w, w^*)",
                           "angle between student and teacher, acos(theta / sqrt(q rho))")


def eps_g_observable(loss: sp.Expr) -> TestObservable:
    """The default observable: the per-sample loss at the test point, ``eps_g = E l(omega, h*)``."""
    return TestObservable(TEST_LOSS, loss, r"\varepsilon_g",
                          "test error: the loss at a fresh sample (h has the law of the test fields)", implicit=True)


def with_test_loss(loss: sp.Expr, declared: Sequence[Observable]) -> tuple[Observable, ...]:
    """The model's observables: ``eps_g`` first (the declared one if any, else the test loss),
    then the others in declaration order. Raises on duplicate names. An implicit test loss among
    ``declared`` (a model re-created from another's observables) is rebuilt from ``loss``."""
    declared = [o for o in declared if not (isinstance(o, Observable) and o.implicit)]
    names = [o.name for o in declared]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise DeclarationError(f"observables: names declared twice: {sorted(dup)}")
    for o in declared:
        if not isinstance(o, Observable):
            raise DeclarationError(f"observables: {o!r} is not a TestObservable, EntropicObservable or "
                                   "StateObservable")
        o.validate()
    first = next((o for o in declared if o.name == TEST_LOSS), None)
    if first is not None and not isinstance(first, TestObservable):
        raise DeclarationError(f"observables: {TEST_LOSS} must be a TestObservable (the test loss)")
    return (first or eps_g_observable(loss),) + tuple(o for o in declared if o.name != TEST_LOSS)
