"""Cost and misses of the prox searches at the paper's states (issue 14, item 3a).

Compares, on the same nodes:

* ``replica`` -- today's multistart damped Newton (:func:`replica.numeric.prox.prox`, starts ``y, 0, -y``);
* ``starts5`` -- damped Newton from the five structured starts of
  :func:`benchmarks.certify.globalmin._starts_newton` (``y, 0, -y`` and the two zero-loss points
  ``+-(u_1, -u_2)/sqrt(u_1 + u_2)``, ``u_i = logit t_i``);
* ``certified`` -- the same plus the branch-and-bound certificate.

Misses are counted against the certified minimum (``F`` higher by more than 1e-10); the effect
of the misses on ``E[F]`` is weighted with the rule's weights. Node sets: random normal nodes
(the generic case) and tensor Gauss-Hermite 14^4 (which puts weight on the symmetry planes
``xi_1 = xi_2``, ``eta_1 = +-eta_2`` where ``y_1 = y_2`` and ``t_1 = t_2``: all three replica
starts lie on the invariant line ``h_1 = h_2`` and Newton stops at a saddle).

Timings are wall-clock on whatever machine runs this; re-measure on a quiet machine before
quoting them. ``python -m benchmarks.certify.bench_prox [--out FILE]``.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from . import globalmin
from .energetic import tensor_nodes
from .integrand import NodeData
from .model import Params

STATES = {
    "semantic alpha=2": (0.1148173, 12.668393, 0.0, 0.1581586),
    "agnostic alpha=2.275": (0.1110, 22.12, 0.0, 0.0),
    "positional alpha=0.5": (0.03072, 20.64, 0.2194, 0.0),
}


def run(n_random: int = 20000, seed: int = 0) -> list[dict]:
    from replica.registry import load_module

    G = load_module("attention_tied")
    from replica.numeric.prox import prox as replica_prox

    p = Params()
    P = np.array(G.DEFAULTS, dtype=float)
    rows = []
    rng = np.random.default_rng(seed)
    zt, wt = tensor_nodes(14)
    node_sets = {"random": (rng.standard_normal((4, n_random)), np.full(n_random, 1.0 / n_random)),
                 "GH 14^4": (zt, wt)}
    globalmin.prox(np.zeros(2), np.zeros(2), np.full(2, 0.6), np.full(2, 0.6), 20.0, 0.25)   # compile
    for name, x in STATES.items():
        for nodes, (z, w) in node_sets.items():
            nd = NodeData(z, x, p)
            t0 = time.perf_counter()
            rc = globalmin.prox(nd.y1, nd.y2, nd.t1, nd.t2, nd.V, nd.sig2, certify=True)
            t_cert = time.perf_counter() - t0
            t0 = time.perf_counter()
            rs = globalmin.prox(nd.y1, nd.y2, nd.t1, nd.t2, nd.V, nd.sig2, certify=False)
            t_s5 = time.perf_counter() - t0
            t0 = time.perf_counter()
            rr = replica_prox(G, z, np.array(x), P)
            t_rep = time.perf_counter() - t0
            N = z.shape[1]
            row = dict(state=name, nodes=nodes, N=int(N),
                       us_per_node=dict(replica=1e6 * t_rep / N, starts5=1e6 * t_s5 / N, certified=1e6 * t_cert / N),
                       boxes_mean=float(rc.boxes.mean()), boxes_max=int(rc.boxes.max()),
                       uncertified=int((rc.status == 2).sum()), ties=int((rc.status == 1).sum()))
            for label, F in (("replica", rr.value), ("starts5", rs.F)):
                miss = F - rc.F > 1e-10
                row[f"misses_{label}"] = int(miss.sum())
                row[f"dEF_{label}"] = float(((F - rc.F) * miss) @ w)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000, help="random nodes per state")
    ap.add_argument("--out", help="write the rows as JSON")
    a = ap.parse_args(argv)
    rows = run(a.n)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
