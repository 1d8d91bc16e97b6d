"""What an energetic average returns, what an integrator must provide to compute one, and the
average over the nodes of one rule that the quadrature integrators share.

The solver needs, at a state ``x``, the energetic potential ``Psi_y = -E min_h F`` and its
gradient ``dPsi_y/dx = -E[dF/dx at h = argmin]`` (envelope theorem). An *integrator* computes
both (:class:`replica.numeric.integrators.QuadratureIntegrator`, the jump-aware
:class:`replica.numeric.preintegration.PreintegrationIntegrator`, the kink-aware
:class:`replica.numeric.kinks.KinkIntegrator`); they build on the names here, which is why they live in a
module of their own. With a teacher channel (module ``WEIGHTED``) every node's minimum is
multiplied by the label law ``W`` (and the gradient is that of ``W F``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..interface.generated_model import GeneratedModel
from .compiled import compiled, resolve_backend
from .prox import (AGREE_TOL, GLOBAL, NEWTON_MAX_ITER, SADDLE_PROBE, SADDLE_TOL, ProxConvention, envelope_gradient,
                   local_prox, newton_minimize, prox)


@dataclass
class EnergeticAverage:
    """``dPsi_y/dx`` (order-parameter order), ``Psi_y``, a warm-start state and prox diagnostics
    (``n_saddle``: nodes where the local convention's descent stopped on a saddle)."""

    grad: np.ndarray
    psi_y: float
    state: Any
    n_disagree: int
    n_failed: int
    n_saddle: int = 0


class EnergeticIntegrator(Protocol):
    """What the solver needs of an integrator: the energetic average and its envelope gradient
    at a state, a companion for error estimates, and a description."""

    dim: int

    def average(self, module: GeneratedModel, x: np.ndarray, p: np.ndarray, warm: Any = None,
                multistart: bool = True, prox_tol: float = 1e-12) -> EnergeticAverage:
        """``Ψ_y`` and its gradient in the order parameters at state ``x``, parameters ``p``
        (``warm``: the previous minimisers)."""
        ...

    def companion(self) -> "EnergeticIntegrator":
        """A second, coarser integrator whose disagreement estimates this one's error."""
        ...

    def describe(self) -> str:
        """A one-line description (rule, order, nodes) for reports and cache keys."""
        ...


def label_weighted(module, values: np.ndarray, z: np.ndarray, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``W F_min`` with a teacher channel's label law ``W`` (module ``WEIGHTED``), else ``F_min``."""
    if not module.WEIGHTED:
        return values
    return values * np.asarray(module.label_weight(z, x, p), dtype=float)


def average_on_nodes(module: GeneratedModel, nodes: np.ndarray, weights: np.ndarray, x: np.ndarray, p: np.ndarray,
                     warm: Any = None, multistart: bool = True, prox_tol: float = 1e-12, backend: str = "auto",
                     chunk: int = 4096, warm_starts: int = 1, n_starts: int | None = None,
                     convention: ProxConvention = GLOBAL) -> EnergeticAverage:
    """``Psi_y`` and its gradient as weighted sums over ``nodes`` ``(nz, N)``: the global prox at
    every node (compiled kernels, or numpy in chunks of ``chunk`` nodes; the exact piecewise prox for a
    piecewise bracket), the envelope gradient at the minimisers. ``warm``: previous minimisers
    ``(PROX_DIM, N)``; with ``multistart=False`` only they and ``warm_starts`` module starts are used
    (``n_starts``, compiled path: that many module starts instead, 0 for the warm start alone).
    ``convention``: the local convention takes the minimiser reached by descent from its start
    instead (:func:`local_average_on_nodes`; ``warm`` and the starts are then not used)."""
    if convention.local:
        return local_average_on_nodes(module, nodes, weights, x, p, convention, prox_tol, backend, chunk)
    N = nodes.shape[1]
    if warm is not None and np.shape(warm) != (module.PROX_DIM, N):
        warm = None
    if resolve_backend(module, backend) == "numba":
        return _average_compiled(module, nodes, weights, x, p, warm, multistart, prox_tol, warm_starts, n_starts)
    grad = np.zeros(len(module.ORDER_PARAMETERS))
    psi = 0.0
    h_all = np.empty((module.PROX_DIM, N))
    n_dis = n_fail = 0
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for a in range(0, N, max(chunk, 1)):
            sl = slice(a, min(a + chunk, N))
            z = nodes[:, sl]
            res = prox(module, z, x, p, warm=None if warm is None else warm[:, sl], tol=prox_tol,
                       multistart=multistart, n_starts=None if multistart else warm_starts)
            G = envelope_gradient(module, res, z, x, p)
            grad += G @ weights[sl]
            psi += float(label_weighted(module, res.value, z, x, p) @ weights[sl])
            h_all[:, sl] = res.h
            n_dis += res.n_disagree
            n_fail += res.n_failed
    return EnergeticAverage(-grad, -psi, h_all, n_dis, n_fail)


#: a compiled average over more nodes than this runs in ``CHUNKS`` fixed node chunks: its sums are
#: then the same whatever the number of threads (:func:`kernel_threads`) that run the chunks
MIN_CHUNKED = 4096
CHUNKS = 4

_POOL: list = []


def kernel_threads() -> int:
    """Threads that run the node chunks of a compiled average (the kernels release the GIL):
    ``$REPLICA_THREADS`` if set, else the CPUs this process may use (pool workers set 1)."""
    env = os.environ.get("REPLICA_THREADS", "")
    if env.strip().isdigit() and int(env) >= 1:
        return int(env)
    from ..runtime.executors import available_cpus

    return available_cpus()


def chunk_map(fn, n: int) -> list:
    """``[fn(a, b) for (a, b) in node chunks of 0..n]`` (one chunk up to :data:`MIN_CHUNKED` nodes,
    else :data:`CHUNKS` equal ones), the chunks run by :func:`kernel_threads` threads; results in
    chunk order."""
    if n <= MIN_CHUNKED:
        return [fn(0, n)]
    edges = [round(i * n / CHUNKS) for i in range(CHUNKS + 1)]
    spans = list(zip(edges[:-1], edges[1:]))
    threads = min(kernel_threads(), CHUNKS)
    if threads <= 1:
        return [fn(a, b) for a, b in spans]
    key = (threads, os.getpid())  # a forked child has the pool object but not its threads
    if not _POOL or _POOL[0][0] != key:
        from concurrent.futures import ThreadPoolExecutor

        if _POOL:
            old_key, old = _POOL.pop()
            if old_key[1] == os.getpid():
                old.shutdown(wait=False)
        _POOL.append((key, ThreadPoolExecutor(max_workers=threads, thread_name_prefix="replica-kernel")))
    futures = [_POOL[0][1].submit(fn, a, b) for a, b in spans]
    return [f.result() for f in futures]


def _summed(parts: list, n: int) -> tuple[np.ndarray, float, int, int]:
    """The chunks' ``((psi, count, n_failed), grad)`` of a compiled node average (:func:`chunk_map`) added up
    in chunk order: ``(grad, psi, count, n_failed)``."""
    grad = np.zeros(n)
    psi, count, n_fail = 0.0, 0, 0
    for (ps, c, nf), g in parts:
        grad += g
        psi += ps
        count += c
        n_fail += nf
    return grad, psi, count, n_fail


def _average_compiled(module, nodes, weights, x, p, warm, multistart, prox_tol, warm_starts,
                      n_starts=None) -> EnergeticAverage:
    k = compiled(module)
    N, D = nodes.shape[1], module.PROX_DIM
    x = np.ascontiguousarray(x, dtype=float)
    p = np.ascontiguousarray(p, dtype=float)
    use_warm = warm is not None
    # Same starts as the numpy path: every start of the module (plus the warm one), or,
    # with multistart=False and a warm start, the warm start and warm_starts more.
    if n_starts is None:
        n_starts = module.N_STARTS if (multistart or not use_warm) else warm_starts
    w_arr = np.ascontiguousarray(warm, dtype=float) if use_warm else np.zeros((D, 1))
    h_out = np.empty((D, N))
    failed = np.zeros(N, dtype=np.bool_)

    def run(a: int, b: int):
        whole = a == 0 and b == N
        h = h_out if whole else np.empty((D, b - a))
        grad = np.zeros(len(x))
        out = k.node_prox_average(nodes if whole else np.ascontiguousarray(nodes[:, a:b]), weights[a:b],
                                  w_arr if (whole or not use_warm) else np.ascontiguousarray(w_arr[:, a:b]),
                                  use_warm, n_starts, x, p, float(prox_tol), NEWTON_MAX_ITER, AGREE_TOL, h,
                                  failed[a:b], grad)
        if not whole:
            h_out[:, a:b] = h
        return out, grad

    grad, psi, n_dis, n_fail = _summed(chunk_map(run, N), len(x))
    if n_fail:
        # Robust numpy/scipy fallback (per-node L-BFGS) for the rare failed nodes.
        idx = np.flatnonzero(failed)
        z = nodes[:, idx]
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            res = prox(module, z, x, p, warm=warm[:, idx] if use_warm else None, tol=prox_tol,
                       multistart=True)
            G = envelope_gradient(module, res, z, x, p)
        grad += G @ weights[idx]
        psi += float(label_weighted(module, res.value, z, x, p) @ weights[idx])
        h_out[:, idx] = res.h
        n_fail = res.n_failed
    return EnergeticAverage(-grad, -float(psi), h_out, int(n_dis), int(n_fail))


def local_average_on_nodes(module: GeneratedModel, nodes: np.ndarray, weights: np.ndarray, x: np.ndarray,
                           p: np.ndarray, convention: ProxConvention, prox_tol: float = 1e-12, backend: str = "auto",
                           chunk: int = 4096) -> EnergeticAverage:
    """``Psi_y`` and its gradient under the local convention: at every node the minimiser reached by
    descent from the convention's start (:func:`replica.numeric.prox.local_prox`; the compiled
    :func:`replica.numeric.kernels.node_local_average` where the backend allows), the envelope gradient there.
    A node whose descent stops on a saddle counts half for the minimum on each side of it. No warm
    start: the descent always starts from the declared point, which is what defines the minimiser."""
    N, D = nodes.shape[1], module.PROX_DIM
    x = np.ascontiguousarray(x, dtype=float)
    p = np.ascontiguousarray(p, dtype=float)
    start = np.ascontiguousarray(convention.start_point(D), dtype=float)
    if resolve_backend(module, backend) == "numba":
        k = compiled(module)
        h_out = np.empty((D, N))
        status = np.zeros(N, dtype=np.int64)

        def run(a: int, b: int):
            grad = np.zeros(len(x))
            h = np.empty((D, b - a))
            st = np.zeros(b - a, dtype=np.int64)
            out = k.node_local_average(np.ascontiguousarray(nodes[:, a:b]), weights[a:b], start, x, p,
                                       float(prox_tol), LOCAL_MAX_ITER, float(convention.step), SADDLE_TOL,
                                       SADDLE_PROBE, convention.saddles == "stay", h, st, grad)
            h_out[:, a:b] = h
            status[a:b] = st
            return out, grad

        grad, psi, n_sad, n_fail = _summed(chunk_map(run, N), len(x))
        return EnergeticAverage(-grad, -float(psi), h_out, 0, int(n_fail), int(n_sad))
    grad = np.zeros(len(module.ORDER_PARAMETERS))
    psi = 0.0
    h_all = np.empty((D, N))
    n_fail = n_sad = 0
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for a in range(0, N, max(chunk, 1)):
            sl = slice(a, min(a + chunk, N))
            z, w = nodes[:, sl], weights[sl]
            res = local_prox(module, z, x, p, convention, tol=prox_tol, max_iter=LOCAL_MAX_ITER)
            ok = np.isfinite(res.value)
            for h, F in ((res.h, res.value), (res.h_other, res.value_other)):
                hh = np.where(ok, h, 0.0)
                G = np.asarray(module.bracket_parameter_gradient(hh, z, x, p), dtype=float)
                grad += 0.5 * (G[:, ok] @ w[ok])
                psi += 0.5 * float(label_weighted(module, np.where(ok, F, 0.0), z, x, p)[ok] @ w[ok])
            h_all[:, sl] = res.h
            n_fail += res.n_failed
            n_sad += res.n_saddle
    return EnergeticAverage(-grad, -psi, h_all, 0, n_fail, n_sad)


#: iterations of the local convention's descent per node (steps are capped: more than Newton's)
LOCAL_MAX_ITER = 200


def start_minima(module: GeneratedModel, nodes: np.ndarray, starts: np.ndarray, x: np.ndarray, p: np.ndarray,
                 prox_tol: float = 1e-12, backend: str = "auto") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Damped Newton from each start of ``starts`` ``(K, PROX_DIM, N)`` at every node, no other
    start and no fallback: the local minimisers reached ``(K, PROX_DIM, N)``, the brackets there and
    whether each converged ``(K, N)``. The compiled kernel where the backend allows
    (:func:`replica.numeric.kernels.node_start_minima`: a start that comes within ``1e-3 (1 + |h*|)`` of an
    earlier start's minimiser, deep in its quadratic basin, stops there and takes it), else
    :func:`replica.numeric.prox.newton_minimize` from each start -- the same minima."""
    x = np.ascontiguousarray(x, dtype=float)
    p = np.ascontiguousarray(p, dtype=float)
    starts = np.ascontiguousarray(starts, dtype=float)
    K, N = starts.shape[0], nodes.shape[1]
    if resolve_backend(module, backend) != "numba":
        out = [newton_minimize(module, starts[k], nodes, x, p, tol=prox_tol)[:3] for k in range(K)]
        return tuple(np.array([o[i] for o in out]) for i in range(3))  # type: ignore[return-value]
    h = np.empty(starts.shape)
    F = np.empty((K, N))
    ok = np.zeros((K, N), dtype=np.bool_)
    kern = compiled(module).node_start_minima

    def run(a: int, b: int) -> None:
        hc, Fc, okc = np.empty((K, module.PROX_DIM, b - a)), np.empty((K, b - a)), np.zeros((K, b - a), dtype=np.bool_)
        kern(np.ascontiguousarray(nodes[:, a:b], dtype=float), np.ascontiguousarray(starts[:, :, a:b]), x, p,
             float(prox_tol), NEWTON_MAX_ITER, hc, Fc, okc)
        h[:, :, a:b], F[:, a:b], ok[:, a:b] = hc, Fc, okc

    chunk_map(run, N)
    return h, F, ok
