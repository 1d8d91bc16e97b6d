"""Tied attention with a rank-2 student learning a rank-1 teacher (paper Appendix E.3, Fig. 11).

``Q in R^{d x 2}``: ``h in R^{L x 2}``, ``S(h) = softmax_row(h h^T)``; target, data, penalty and
branches as in :mod:`derivations.attention_tied` (``q, V`` are ``2 x 2``, ``m, theta`` 2-vectors,
the energetic average is over ``L r + L r_t = 6`` Gaussians). ``S`` is invariant under
``h -> h O`` for every orthogonal ``O``: fixed points come in ``O(2)`` orbits, so compare
rotation-invariant quantities (eigenvalues of ``q``, ``|m|``, ``|theta|``, ``theta^T q^-1 theta``).
"""
from __future__ import annotations

from derivations.attention_tied import build

model = build(L=2, r=2, r_t=1, name="attention_rank2")

if __name__ == "__main__":
    from replica.cli import main

    main(["derive", "attention_rank2", "--write"])
