"""Averages over cluster labels: Gaussian rules x label configurations (docs/explanation/theory.md §8, token clusters).

A generated module of a model with token clusters evaluates its bracket at nodes
``z = (Gaussians, DISCRETE)``: the Gaussian coordinates, then the one-hot label indicators
``e_{lc}`` of one label configuration (module constants ``DISCRETE``, ``CONFIGURATIONS``,
and ``label_probabilities(p)``, see :mod:`replica.codegen`). The energetic and test averages
``E_{c ~ P} E_z[...]`` are then ordinary weighted sums over the *product rule*: every node of
a Gaussian rule, repeated for every configuration with weight ``w_j P(c)``.
:class:`LabelledRule` is that product; it is a :class:`~replica.numeric.quadrature.QuadratureRule`
(so the integrators, the sign-flip folding and the compiled kernels use it unchanged) that
knows its Gaussian factor, for companions and descriptions.

Sign-flip folding (module ``SYMMETRIES``) only ever flips Gaussian coordinates, which come
first, so a folded product rule never mixes configurations.

A teacher channel (:mod:`replica.symbolic.channels`) adds one more discrete coordinate, its label ``y``
(module ``LABEL``, values ``LABEL_VALUES``), after the cluster indicators: :class:`ChannelRule`
repeats a rule for every label value with *unit* weight, because the label's law
``W(y | z; x)`` depends on the state and is carried by the integrand (``label_weight``). A
symmetric channel's fold flips the label with the Gaussians (``y -> -y``), which maps the set of
label values onto itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..interface.generated_model import GeneratedModel
from .quadrature import QuadratureRule


def has_labels(module: GeneratedModel) -> bool:
    """Whether a generated module averages over cluster labels (token clusters)."""
    return bool(module.DISCRETE)


def label_law(module: GeneratedModel, p: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(values (len(DISCRETE), C), probabilities (C,))`` of the configurations of positive
    probability at parameters ``p``; None for a module without labels."""
    if not has_labels(module):
        return None
    values = np.asarray(module.CONFIGURATIONS, dtype=float).T.reshape(len(module.DISCRETE), -1)
    probs = np.atleast_1d(np.asarray(module.label_probabilities(p), dtype=float))
    keep = probs > 0
    return np.ascontiguousarray(values[:, keep]), probs[keep]


@dataclass(frozen=True)
class LabelledRule(QuadratureRule):
    """A Gaussian rule times the label configurations: nodes ``(dim + n_discrete, N C)``,
    configuration-major, weights ``w_j P(c)`` (summing to 1)."""

    base: QuadratureRule | None = None
    values: np.ndarray | None = None
    probabilities: np.ndarray | None = None

    @property
    def gaussian_dim(self) -> int:
        """Number of Gaussian coordinates (those before the label indicators)."""
        return self.base.dim

    def companion(self) -> "LabelledRule":
        """The Gaussian rule's companion times the same label configurations."""
        return with_labels(self.base.companion(), self.values, self.probabilities)

    def refined(self, factor: float | None = None) -> "LabelledRule":
        """The Gaussian rule's refinement times the same label configurations."""
        return with_labels(self.base.refined(factor), self.values, self.probabilities)

    def describe(self) -> str:
        """The Gaussian rule's description and the number of label configurations."""
        return f"{self.base.describe()} x {self.probabilities.size} label configurations"


def with_labels(rule: QuadratureRule, values: np.ndarray, probabilities: np.ndarray) -> LabelledRule:
    """The product of a Gaussian ``rule`` with the label configurations ``values`` (columns)."""
    values = np.asarray(values, dtype=float)
    probabilities = np.asarray(probabilities, dtype=float)
    C, N = probabilities.size, rule.size
    nodes = np.concatenate([np.tile(rule.nodes, (1, C)), np.repeat(values, N, axis=1)], axis=0)
    weights = np.concatenate([rule.weights * pc for pc in probabilities])
    return LabelledRule(np.ascontiguousarray(nodes), weights, rule.kind, rule.order,
                        base=rule, values=values, probabilities=probabilities)


def labelled(rule, module: GeneratedModel, p: np.ndarray):
    """``rule`` extended by the module's label law when it is a Gaussian rule of a module with
    labels (``rule.dim == len(GAUSSIANS)``), then by a channel's label values; anything else is
    returned unchanged."""
    if not isinstance(rule, QuadratureRule) or isinstance(rule, ChannelRule):
        return rule
    law = label_law(module, p)
    if law is not None and not isinstance(rule, LabelledRule) and rule.dim == len(module.GAUSSIANS):
        rule = with_labels(rule, *law)
    values = channel_values(module)
    if values is not None and rule.dim == len(module.GAUSSIANS) + len(module.DISCRETE):
        rule = with_channel(rule, values)
    return rule


def channel_values(module: GeneratedModel) -> np.ndarray | None:
    """The label values of a module with a teacher channel, else None."""
    vals = module.LABEL_VALUES
    return None if vals is None else np.asarray(vals, dtype=float)


@dataclass(frozen=True)
class ChannelRule(QuadratureRule):
    """A rule repeated for every value of a channel's label (last coordinate), unit weights: the
    weights sum to the number of labels, the label law is in the integrand."""

    base: QuadratureRule | None = None
    values: np.ndarray | None = None

    def companion(self) -> "ChannelRule":
        """The base rule's companion, times the same label values."""
        return with_channel(self.base.companion(), self.values)

    def refined(self, factor: float | None = None) -> "ChannelRule":
        """The base rule's refinement, times the same label values (the inherited one would refine
        the label coordinate as if it were one more Gaussian)."""
        return with_channel(self.base.refined(factor), self.values)

    def describe(self) -> str:
        """The base rule's description and the number of label values."""
        return f"{self.base.describe()} x {self.values.size} channel labels"


def with_channel(rule: QuadratureRule, values: np.ndarray) -> ChannelRule:
    """``rule`` (nodes ``(dim, N)``) times the label values: nodes ``(dim + 1, N K)``, label-major."""
    values = np.asarray(values, dtype=float)
    K, N = values.size, rule.size
    nodes = np.concatenate([np.tile(rule.nodes, (1, K)), np.repeat(values, N)[None, :]], axis=0)
    weights = np.tile(rule.weights, K)
    return ChannelRule(np.ascontiguousarray(nodes), weights, rule.kind, rule.order, base=rule, values=values)
