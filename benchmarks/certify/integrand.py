"""The energetic integrand at a node: prox centre, targets, and ``dF/dx`` at the minimiser.

Node coordinates are the four independent standard normals of docs/explanation/theory.md §3,
``z = (xi_1, xi_2, eta_1, eta_2)``, so that every integration scheme of
:mod:`benchmarks.certify.energetic` only decides where the nodes go. With ``x = (q, V, m, theta)``::

    y_l  = m pi_l + sqrt(q) xi_l,              pi = (1, -1)
    h*_l = c xi_l + s eta_l,                   c = theta / sqrt(q),  s = sqrt(rho - theta^2 / q)

and, at the minimiser ``h`` (envelope theorem: ``h`` held fixed)::

    dF/dV     = -|h - y|^2 / (2 V^2)
    dF/dm     = -sum_l pi_l (h_l - y_l) / V
    dF/dq     = -sum_l (h_l - y_l) xi_l / (2 V sqrt q) + sum_i dl/dt_i dt_i/dq
    dF/dtheta =                                          sum_i dl/dt_i dt_i/dtheta
    dl/dt_i   = 2 sigma^2 (t_i - S_ii(h)),    dt_i/dx = sum_k dt_i/dh*_k dh*_k/dx
    dh*_k/dq  = -theta xi_k / (2 q^{3/2}) + theta^2 eta_k / (2 q^2 s)
    dh*_k/dtheta = xi_k / sqrt q - theta eta_k / (q s)
"""
from __future__ import annotations

import numpy as np

from .model import Params, student_diagonal, target_gradients, targets


class NodeData:
    """Everything about a set of nodes that does not depend on the minimiser."""

    def __init__(self, z: np.ndarray, x, p: Params):
        q, V, m, th = (float(v) for v in x)
        xi1, xi2, eta1, eta2 = z
        sq = np.sqrt(q)
        c = th / sq
        s = np.sqrt(max(p.rho - th * th / q, 0.0))
        self.z = z
        self.V = V
        self.y1 = m + sq * xi1
        self.y2 = -m + sq * xi2
        hs1 = c * xi1 + s * eta1
        hs2 = c * xi2 + s * eta2
        self.t1, self.t2 = targets(hs1, hs2, p)
        g11, g12, g21, g22 = target_gradients(hs1, hs2, p)
        s_safe = s if s > 0 else np.inf
        dq1 = -th * xi1 / (2 * q * sq) + th * th * eta1 / (2 * q * q * s_safe)
        dq2 = -th * xi2 / (2 * q * sq) + th * th * eta2 / (2 * q * q * s_safe)
        dth1 = xi1 / sq - th * eta1 / (q * s_safe)
        dth2 = xi2 / sq - th * eta2 / (q * s_safe)
        self.dt1_dq = g11 * dq1 + g12 * dq2
        self.dt2_dq = g21 * dq1 + g22 * dq2
        self.dt1_dth = g11 * dth1 + g12 * dth2
        self.dt2_dth = g21 * dth1 + g22 * dth2
        self.dy1_dq = xi1 / (2 * sq)
        self.dy2_dq = xi2 / (2 * sq)
        self.sig2 = p.sig2

    def values(self, h1, h2, F):
        """``(5, N)``: ``F, dF/dq, dF/dV, dF/dm, dF/dtheta`` at the minimisers."""
        V = self.V
        r1, r2 = h1 - self.y1, h2 - self.y2
        S1, S2 = student_diagonal(h1, h2)
        dl1 = 2 * self.sig2 * (self.t1 - S1)
        dl2 = 2 * self.sig2 * (self.t2 - S2)
        dq = -(r1 * self.dy1_dq + r2 * self.dy2_dq) / V + dl1 * self.dt1_dq + dl2 * self.dt2_dq
        dV = -(r1 * r1 + r2 * r2) / (2 * V * V)
        dm = -(r1 - r2) / V
        dth = dl1 * self.dt1_dth + dl2 * self.dt2_dth
        return np.stack([F, dq, dV, dm, dth])

    def test_loss(self):
        """The loss at the prox centre ``y`` (the student's test field): integrand of ``eps_g``."""
        S1, S2 = student_diagonal(self.y1, self.y2)
        return self.sig2 * ((self.t1 - S1) ** 2 + (self.t2 - S2) ** 2)
