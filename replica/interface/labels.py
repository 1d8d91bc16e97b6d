"""Drawing labels from a discrete law: the one sampler a channel (:mod:`replica.symbolic.channels`)
and the numerics (the replicon's switching prox, :mod:`replica.numeric.stability`) share."""
from __future__ import annotations

import numpy as np


def draw_labels(P: np.ndarray, values, rng: np.random.Generator) -> np.ndarray:
    """One label per column of ``P`` (rows: the probabilities of ``values``), drawn by the inverse
    of the column's cumulative law from one uniform per column."""
    cum = np.cumsum(P, axis=0)
    idx = np.minimum((rng.random(P.shape[1])[None, :] > cum).sum(axis=0), len(values) - 1)
    return np.asarray(values, dtype=float)[idx]
