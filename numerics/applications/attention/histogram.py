"""The histogram task of the seed paper (its Appendix A, Figs. 1, 4–6): a one-layer transformer
with a positional and a semantic minimum.

Task (paper A.2). A sequence ``x = (x_1, …, x_T)`` of ``T`` tokens drawn iid uniformly from an
alphabet of ``L = 15`` tokens (letters A, B, … in the plots) is mapped to its histogram
sequence ``y_i = Σ_j 1[x_j = x_i]`` (the number of occurrences of the token at position ``i``;
``y_i ∈ {1, …, T}``). For each position the model outputs ``T`` logits, one per count.

Model (paper A.3; the text of the paper lost its formulas, the reconstruction below follows
the prose of A.3–A.4 and is stated so it can be checked):

* embeddings of dimension ``2·D`` for tokens and positions; token ``a`` is embedded as
  ``(e_a, 0_D)`` and position ``i`` as ``(0_D, p_i)`` (the zero blocks are the "all-zero
  vectors of size D" of eq. 28, frozen); the input row is ``x̃_i = (e_{x_i}, p_i)``;
* one head of dot-product attention, ``S = (X̃ W_Q)(X̃ W_K)ᵀ/√D_k``,
  ``A = softmax_row(S)`` (the matrix drawn in Fig. 4), value ``W_V`` and a residual
  connection, ``z_i = x̃_i + (A X̃ W_V)_i``. With the residual the positional minimum is
  what the paper's A.1 describes, attention that "aggregates the other tokens uniformly" while
  the feed-forward layer counts. ``residual=False`` (``z_i = (A X̃ W_V)_i``) is the other
  reading of A.1 ("similar to the identity"): its positional attention is identity plus
  uniform, but its semantic minimum reaches only 89 % test accuracy in the same budget
  (measured, docs/how-to/experiments.md), so it is not the default;
* a feed-forward readout ``logits_i = W_2 ReLU(W_1 z_i + b_1) + b_2 ∈ R^T``, prediction
  ``argmax``; cross-entropy averaged over all output tokens (eq. 25).

Minima (paper A.4). Both runs start from PyTorch's default initialisation and overwrite
blocks of ``W_Q, W_K`` (shape ``2D × D_k``) with zeros that stay frozen during training
with Adam:

* ``positional``: the token rows of ``W_Q, W_K`` are 0, so ``A`` depends on positions only;
* ``semantic``: the position rows are 0, so ``A`` depends on token identities only.

Stability (paper A.5). The frozen minimum is perturbed with iid ``N(0, perturb²)`` noise on
every parameter (frozen zeros included) and trained further with plain SGD for
``sgd_epochs`` epochs with nothing frozen. Reported: test accuracy before and after, the
relative parameter change ``‖θ' − θ‖/‖θ‖``, and the attention index before and after.

Positional/semantic index of the learnt attention. Over ``n_index`` fresh test sequences
take every OFF-diagonal attention weight ``A^s_{ij}`` (``i ≠ j``; the diagonal is left out
because ``x_i = x_i`` always, so a semantic head also raises the diagonal, a positional
feature) and compute two correlation ratios (fractions of variance explained):

* ``r2_position = Var_{(i,j)}(E[A | i, j]) / Var(A)``: the part explained by the position
  pair ``(i, j)`` (``T(T−1)`` groups);
* ``r2_token = Var_{(a,b)}(E[A | x_i = a, x_j = b]) / Var(A)``: the part explained by the
  token pair (``L²`` groups; it contains the same-token indicator ``1[x_i = x_j]``);

and ``positional_index = r2_position / (r2_position + r2_token) ∈ [0, 1]``: 1 for attention
driven by positions only, 0 for attention driven by tokens only. Being a ratio of variances
it ignores how large the variation is; the second number,
``same_token_ratio = E[A_ij | x_i = x_j] / E[A_ij | x_i ≠ x_j]`` (off-diagonal pairs), says
how strongly identical tokens attend to each other (the paper's description of the semantic
mechanism): exactly 1 in expectation for any token-blind attention (tokens are independent
of positions), ≫ 1 for a semantic one. Each ratio has a positive
finite-sample bias of about ``(groups − 1)/N`` (N = n_index·T(T−1) weights; 225/180 000 ≈
1.3e-3 at the defaults), far below the separation of the two minima. ``attention_spread``
= ``std(A)·T`` says how far ``A`` is from uniform (0: uniform); with ``Var(A) = 0`` the
index is undefined and reported as ``null``.

CLI::

    python -m numerics.simulate histogram --init positional --seeds 3 --json
    python -m numerics.simulate histogram --init semantic --plot maps.png

Progress goes to stderr; bad input stops with a one-line error and exit status 2. Times are
reported as process CPU seconds (``time.process_time``, all threads) and wall seconds.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

__all__ = [
    "INITS",
    "HistogramConfig",
    "histogram_targets",
    "sample_sequences",
    "attention_index",
    "build_model",
    "run_seed",
    "run",
    "plot_attention_maps",
    "draw_attention_maps",
    "read_attention_maps",
    "main",
]

INITS: tuple[str, ...] = ("positional", "semantic")


@dataclass(frozen=True)
class HistogramConfig:
    """Sizes and training settings. Defaults: ``T = 10``, ``L = 15`` (the paper's alphabet),
    embedding halves ``D = 16``, Adam at ``lr = 3e-3`` on 20 000 training sequences, then the
    stability check (noise 0.01, then 100 epochs of SGD at lr 0.01; the paper's A.5 also uses
    100 epochs, its noise scale and learning rate were lost with its formulas)."""

    T: int = 10  #: sequence length
    alphabet: int = 15  #: number of tokens L
    dim: int = 16  #: D, the size of each embedding half (model width 2D)
    dim_k: int = 16  #: D_k, query/key width
    hidden: int = 256  #: width of the feed-forward layer
    residual: bool = True  #: add the input to the attention output (``z = x̃ + A X̃ W_V``)
    n_train: int = 20_000
    n_test: int = 5_000
    n_index: int = 2_000  #: test sequences for the attention index
    batch: int = 256
    lr: float = 3e-3  #: Adam learning rate (frozen training)
    epochs: int = 40  #: Adam epochs over the training set
    perturb: float = 0.01  #: std of the Gaussian perturbation of every parameter
    sgd_lr: float = 0.01
    sgd_epochs: int = 100  #: epochs of unconstrained SGD after the perturbation (paper: 100)
    stability: bool = True  #: run the stability check

    def __post_init__(self) -> None:
        ints = ("T", "alphabet", "dim", "dim_k", "hidden", "n_train", "n_test", "n_index", "batch")
        for name in ints:
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive integer (got {v!r})")
        if self.T < 2:
            raise ValueError(f"T must be >= 2 (got {self.T})")
        if self.alphabet < 2:
            raise ValueError(f"alphabet must be >= 2 (got {self.alphabet})")
        for name in ("epochs", "sgd_epochs"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"{name} must be a non-negative integer (got {v!r})")
        for name in ("lr", "sgd_lr"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be > 0 (got {v!r})")
        if not (isinstance(self.perturb, (int, float)) and math.isfinite(self.perturb) and self.perturb >= 0):
            raise ValueError(f"perturb must be >= 0 (got {self.perturb!r})")


def quick_config(**overrides: Any) -> HistogramConfig:
    """A small configuration for tests (seconds): ``T = 6``, 6 tokens, short training."""
    base = HistogramConfig(T=6, alphabet=6, dim=8, dim_k=8, hidden=64, n_train=4000, n_test=1000,
                           n_index=500, batch=128, lr=1e-2, epochs=25, sgd_epochs=5)
    return replace(base, **overrides)


# --------------------------------------------------------------------------- data
def histogram_targets(x: np.ndarray) -> np.ndarray:
    """``y_i = Σ_j 1[x_j = x_i]`` for integer sequences ``x`` of shape (n, T) (paper A.2)."""
    x = np.asarray(x)
    return (x[:, :, None] == x[:, None, :]).sum(axis=-1)


def sample_sequences(n: int, T: int, alphabet: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` sequences of ``T`` tokens iid uniform on ``{0, …, alphabet−1}`` and their histograms."""
    x = rng.integers(0, alphabet, size=(n, T))
    return x, histogram_targets(x)


def letters(seq: Sequence[int]) -> str:
    """Tokens as capital letters (A = 0), as in the paper's figures."""
    return "".join(chr(ord("A") + int(t)) if t < 26 else f"<{int(t)}>" for t in seq)


# --------------------------------------------------------------------------- model
def build_model(cfg: HistogramConfig, init: str, seed: int) -> "nn.Module":
    """The transformer of the module docstring, frozen for ``init`` (``positional``/``semantic``)."""
    import torch
    from torch import nn
    import torch.nn.functional as F

    if init not in INITS:
        raise ValueError(f"init must be one of {', '.join(INITS)} (got {init!r})")

    class HistogramTransformer(nn.Module):
        """One attention layer + residual + feed-forward readout. ``masks`` are 0/1 buffers
        multiplied into the parameters in the forward pass: a 0 is a weight frozen at zero
        (its gradient vanishes too); :meth:`unfreeze` sets every mask to 1."""

        def __init__(self) -> None:
            super().__init__()
            D, Dk, L, T = cfg.dim, cfg.dim_k, cfg.alphabet, cfg.T
            self.tok = nn.Parameter(torch.randn(L, 2 * D))  # nn.Embedding's default N(0, 1)
            self.pos = nn.Parameter(torch.randn(T, 2 * D))
            lin = lambda i, o, bias=False: nn.Linear(i, o, bias=bias)  # noqa: E731 - PyTorch default init
            self.W_Q = nn.Parameter(lin(2 * D, Dk).weight.detach().T.clone())
            self.W_K = nn.Parameter(lin(2 * D, Dk).weight.detach().T.clone())
            self.W_V = nn.Parameter(lin(2 * D, 2 * D).weight.detach().T.clone())
            self.ff1 = lin(2 * D, cfg.hidden, bias=True)
            self.ff2 = lin(cfg.hidden, T, bias=True)
            ones = lambda p: torch.ones_like(p)  # noqa: E731
            self.register_buffer("m_tok", ones(self.tok))
            self.register_buffer("m_pos", ones(self.pos))
            self.register_buffer("m_QK", ones(self.W_Q))
            self.m_tok[:, D:] = 0  # token embeddings live in the first half (eq. 28)
            self.m_pos[:, :D] = 0  # positional embeddings in the second half
            if init == "positional":
                self.m_QK[:D, :] = 0  # queries/keys blind to tokens
            else:
                self.m_QK[D:, :] = 0  # queries/keys blind to positions
            with torch.no_grad():
                self.tok.mul_(self.m_tok)
                self.pos.mul_(self.m_pos)
                self.W_Q.mul_(self.m_QK)
                self.W_K.mul_(self.m_QK)

        def embed(self, x: torch.Tensor) -> torch.Tensor:
            T = x.shape[1]
            return (self.tok * self.m_tok)[x] + (self.pos * self.m_pos)[:T][None]

        def attention(self, x: torch.Tensor) -> torch.Tensor:
            """Attention matrices ``A`` (n, T, T) of integer sequences ``x`` (n, T)."""
            return self._attention(self.embed(x))

        def _attention(self, e: torch.Tensor) -> torch.Tensor:
            q = e @ (self.W_Q * self.m_QK)
            k = e @ (self.W_K * self.m_QK)
            return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(cfg.dim_k), dim=-1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            """Logits (n, T, T): class ``c`` is the count ``c + 1``."""
            e = self.embed(x)
            z = self._attention(e) @ e @ self.W_V
            if cfg.residual:
                z = z + e
            return self.ff2(F.relu(self.ff1(z)))

        @torch.no_grad()
        def unfreeze(self) -> None:
            for m in (self.m_tok, self.m_pos, self.m_QK):
                m.fill_(1.0)

        def frozen_zero(self) -> bool:
            """Whether every masked entry is exactly zero (a check on the freezing)."""
            return bool(all(float(((p.detach() * (1 - m)) ** 2).sum()) == 0.0 for p, m in
                            ((self.tok, self.m_tok), (self.pos, self.m_pos), (self.W_Q, self.m_QK),
                             (self.W_K, self.m_QK))))

    torch.manual_seed(int(seed))
    return HistogramTransformer()


# --------------------------------------------------------------------------- index
def _correlation_ratio(values: np.ndarray, groups: np.ndarray, total_var: float) -> float:
    """``Var(E[values | group]) / Var(values)`` (between-group share of the variance)."""
    counts = np.bincount(groups)
    sums = np.bincount(groups, weights=values)
    used = counts > 0
    means = sums[used] / counts[used]
    between = float(np.sum(counts[used] * (means - values.mean()) ** 2) / values.size)
    return between / total_var


def attention_index(A: np.ndarray, x: np.ndarray, alphabet: int) -> dict[str, float | None]:
    """Positional/semantic index of attention matrices ``A`` (n, T, T) for sequences ``x`` (n, T).

    See the module docstring: off-diagonal weights only; ``r2_position``, ``r2_token``,
    ``positional_index = r2_position/(r2_position + r2_token)``, ``attention_spread = std(A)·T``,
    ``same_token_ratio = E[A_ij | x_i = x_j]/E[A_ij | x_i ≠ x_j]``.
    """
    A = np.asarray(A, dtype=float)
    x = np.asarray(x)
    n, T, _ = A.shape
    off = ~np.eye(T, dtype=bool)
    vals = A[:, off]  # (n, T(T-1))
    ii, jj = np.nonzero(off)
    pos_group = np.broadcast_to(ii * T + jj, vals.shape).ravel()
    tok_group = (x[:, ii] * alphabet + x[:, jj]).ravel()
    vals = vals.ravel()
    var = float(vals.var())
    spread = math.sqrt(var) * T
    same = (x[:, ii] == x[:, jj]).ravel()
    ratio = float(vals[same].mean() / vals[~same].mean()) if same.any() and (~same).any() else None
    if not var > 1e-300:
        return {"r2_position": None, "r2_token": None, "positional_index": None, "attention_spread": spread,
                "same_token_ratio": ratio}
    r2p = _correlation_ratio(vals, pos_group, var)
    r2t = _correlation_ratio(vals, tok_group, var)
    return {"r2_position": r2p, "r2_token": r2t, "positional_index": r2p / (r2p + r2t),
            "attention_spread": spread, "same_token_ratio": ratio}


# --------------------------------------------------------------------------- training
def _to_tensors(x: np.ndarray, y: np.ndarray, device: "torch.device") -> tuple["torch.Tensor", "torch.Tensor"]:
    import torch

    return (torch.as_tensor(x, dtype=torch.long, device=device),
            torch.as_tensor(y - 1, dtype=torch.long, device=device))  # count c -> class c-1


def _epochs(model: "nn.Module", X: "torch.Tensor", Y: "torch.Tensor", opt: "torch.optim.Optimizer",
            epochs: int, batch: int, gen: "torch.Generator", log: Callable[[str], None], label: str) -> float:
    """Minibatch training for ``epochs`` epochs; returns the last epoch's mean loss."""
    import torch
    import torch.nn.functional as F

    n = X.shape[0]
    last = float("nan")
    for ep in range(epochs):
        perm = torch.randperm(n, generator=gen).to(X.device)
        tot, cnt = 0.0, 0
        for k in range(0, n, batch):
            idx = perm[k:k + batch]
            logits = model(X[idx])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Y[idx].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * idx.numel()
            cnt += idx.numel()
        last = tot / cnt
        if not math.isfinite(last):
            raise FloatingPointError(f"{label}: training loss is not finite at epoch {ep + 1}")
        if (ep + 1) % max(1, epochs // 5) == 0 or ep + 1 == epochs:
            log(f"    {label} epoch {ep + 1}/{epochs}: train cross-entropy {last:.4f}")
    return last


def _evaluate(model: "nn.Module", X: "torch.Tensor", Y: "torch.Tensor", chunk: int = 4096) -> dict[str, float]:
    """Per-token accuracy, whole-sequence accuracy and mean cross-entropy on ``(X, Y)``."""
    import torch
    import torch.nn.functional as F

    correct = seq_ok = 0
    ce = 0.0
    with torch.no_grad():
        for k in range(0, X.shape[0], chunk):
            logits = model(X[k:k + chunk])
            y = Y[k:k + chunk]
            pred = logits.argmax(-1)
            correct += int((pred == y).sum())
            seq_ok += int((pred == y).all(dim=-1).sum())
            ce += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum"))
    n_tok = Y.numel()
    return {"accuracy": correct / n_tok, "sequence_accuracy": seq_ok / Y.shape[0], "cross_entropy": ce / n_tok}


def _attention_np(model: "nn.Module", X: "torch.Tensor") -> np.ndarray:
    import torch

    with torch.no_grad():
        return model.attention(X).double().cpu().numpy()


def _flat(model: "nn.Module") -> "torch.Tensor":
    import torch

    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()


def run_seed(seed: int, init: str, cfg: HistogramConfig | None = None, *, device: str = "cpu",
             log: Callable[[str], None] | None = None, keep_model: bool = False) -> dict[str, Any]:
    """Train one seed from ``init`` (frozen, Adam), then the stability check (perturb, SGD).

    The seed fixes the data (numpy ``SeedSequence(seed)``: train, test, index streams) and the
    initialisation (``torch.manual_seed(seed)``), so both inits of a seed see the same data.
    Returns accuracies, the attention index, CPU and wall seconds; with ``keep_model`` also the
    models (``"model"``: the frozen minimum, ``"model_unfrozen"``: after the stability check).
    """
    import copy

    import torch

    cfg = cfg or HistogramConfig()
    if init not in INITS:
        raise ValueError(f"init must be one of {', '.join(INITS)} (got {init!r})")
    log = log or (lambda s: None)
    dev = torch.device(device)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    s_train, s_test, s_index, s_noise = np.random.SeedSequence(int(seed)).spawn(4)
    xtr, ytr = sample_sequences(cfg.n_train, cfg.T, cfg.alphabet, np.random.default_rng(s_train))
    xte, yte = sample_sequences(cfg.n_test, cfg.T, cfg.alphabet, np.random.default_rng(s_test))
    xix, _ = sample_sequences(cfg.n_index, cfg.T, cfg.alphabet, np.random.default_rng(s_index))
    Xtr, Ytr = _to_tensors(xtr, ytr, dev)
    Xte, Yte = _to_tensors(xte, yte, dev)
    Xix = torch.as_tensor(xix, dtype=torch.long, device=dev)
    gen = torch.Generator().manual_seed(int(seed) + 1)

    model = build_model(cfg, init, seed).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    log(f"  [{init} seed {seed}] Adam, frozen {init} init, {cfg.epochs} epochs of {cfg.n_train} sequences")
    train_ce = _epochs(model, Xtr, Ytr, opt, cfg.epochs, cfg.batch, gen, log, f"[{init} seed {seed}] adam")
    if not model.frozen_zero():  # pragma: no cover - a bug in the masking
        raise AssertionError("frozen weights moved away from zero")
    ev = _evaluate(model, Xte, Yte)
    idx = attention_index(_attention_np(model, Xix), xix, cfg.alphabet)
    out: dict[str, Any] = {
        "seed": int(seed), "init": init, "train_cross_entropy": train_ce,
        "test_accuracy": ev["accuracy"], "test_sequence_accuracy": ev["sequence_accuracy"],
        "test_cross_entropy": ev["cross_entropy"], **idx,
    }
    log(f"  [{init} seed {seed}] frozen minimum: test accuracy {ev['accuracy']:.4f}, "
        f"positional index {_f(idx['positional_index'])}")
    if keep_model:
        out["model"] = copy.deepcopy(model)
    if cfg.stability:
        theta0 = _flat(model)
        model.unfreeze()
        g = torch.Generator().manual_seed(int(s_noise.generate_state(1)[0]))
        with torch.no_grad():
            for p in model.parameters():
                p.add_(cfg.perturb * torch.randn(p.shape, generator=g).to(dev))
        sgd = torch.optim.SGD(model.parameters(), lr=cfg.sgd_lr)
        log(f"  [{init} seed {seed}] stability: perturbation {cfg.perturb:g}, {cfg.sgd_epochs} epochs of SGD, "
            "nothing frozen")
        _epochs(model, Xtr, Ytr, sgd, cfg.sgd_epochs, cfg.batch, gen, log, f"[{init} seed {seed}] sgd")
        ev2 = _evaluate(model, Xte, Yte)
        idx2 = attention_index(_attention_np(model, Xix), xix, cfg.alphabet)
        theta1 = _flat(model)
        out["unfrozen"] = {
            "test_accuracy": ev2["accuracy"], "test_sequence_accuracy": ev2["sequence_accuracy"],
            "test_cross_entropy": ev2["cross_entropy"], **idx2,
            "relative_parameter_change": float((theta1 - theta0).norm() / theta0.norm()),
        }
        log(f"  [{init} seed {seed}] after SGD: test accuracy {ev2['accuracy']:.4f}, "
            f"positional index {_f(idx2['positional_index'])}, "
            f"|dtheta|/|theta| = {out['unfrozen']['relative_parameter_change']:.3g}")
        if keep_model:
            out["model_unfrozen"] = model
    out["cpu_seconds"] = time.process_time() - cpu0
    out["wall_seconds"] = time.perf_counter() - wall0
    return out


def _f(v: float | None) -> str:
    return "undefined" if v is None else f"{v:.3f}"


_SUMMARY_KEYS = ("test_accuracy", "test_sequence_accuracy", "test_cross_entropy", "r2_position", "r2_token",
                 "positional_index", "same_token_ratio", "attention_spread")


def _mean_se(vals: Sequence[float | None]) -> tuple[float | None, float | None]:
    v = [x for x in vals if x is not None]
    if not v:
        return None, None
    a = np.asarray(v, dtype=float)
    se = float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else None
    return float(a.mean()), se


def run(init: str, seeds: int | Sequence[int] = 1, cfg: HistogramConfig | None = None, *, seed_start: int = 0,
        device: str = "cpu", threads: int | None = 1, verbose: bool = False,
        keep_models: bool = False) -> dict[str, Any]:
    """:func:`run_seed` over ``seeds`` (a count from ``seed_start`` or a list); means, SEs, per seed.

    ``keep_models``: the first seed's entry of ``runs`` keeps its models (``model``,
    ``model_unfrozen``), as :func:`run_seed` with ``keep_model``."""
    from numerics.simulate import torch_threads

    cfg = cfg or HistogramConfig()
    seed_list = list(range(seed_start, seed_start + int(seeds))) if isinstance(seeds, (int, np.integer)) \
        else [int(s) for s in seeds]
    if not seed_list:
        raise ValueError("seeds must be >= 1")
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if verbose else (lambda s: None)
    with torch_threads(None if threads is None else int(threads)):
        runs = [run_seed(s, init, cfg, device=device, log=log, keep_model=keep_models and k == 0)
                for k, s in enumerate(seed_list)]
    out: dict[str, Any] = {"task": "histogram", "init": init, "seeds": seed_list, "device": str(device),
                           "config": asdict(cfg)}
    for k in _SUMMARY_KEYS:
        out[k], out[k + "_se"] = _mean_se([r[k] for r in runs])
    if cfg.stability:
        out["unfrozen"] = {}
        for k in (*_SUMMARY_KEYS, "relative_parameter_change"):
            out["unfrozen"][k], out["unfrozen"][k + "_se"] = _mean_se([r["unfrozen"][k] for r in runs])
    out["cpu_seconds"] = float(sum(r["cpu_seconds"] for r in runs))
    out["wall_seconds"] = float(sum(r["wall_seconds"] for r in runs))
    out["runs"] = runs
    return out


# --------------------------------------------------------------------------- figure
def plot_attention_maps(models: Mapping[str, "nn.Module"], sequences: np.ndarray, path: str,
                        csv_path: str | None = None, dpi: int = 150) -> None:
    """Attention matrices of each model (rows, e.g. ``positional``, ``semantic``) on each of
    ``sequences`` (columns), with the tokens as letters on the axes (the paper's Fig. 4).
    ``csv_path``: the plotted weights in long form (model, sequence, i, j, tokens, attention),
    from which :func:`draw_attention_maps` redraws the figure."""
    import torch

    seqs = np.asarray(sequences)
    mats = {}
    for name, model in models.items():
        dev = next(model.parameters()).device
        with torch.no_grad():
            mats[name] = model.attention(torch.as_tensor(seqs, dtype=torch.long, device=dev)).double().cpu().numpy()
    draw_attention_maps(mats, seqs, path, dpi=dpi)
    if csv_path:
        import csv

        with open(csv_path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["model", "sequence", "i", "j", "token_i", "token_j", "attention"])
            for name, A in mats.items():
                for c, seq in enumerate(seqs):
                    lab = letters(seq)
                    for i in range(len(seq)):
                        for j in range(len(seq)):
                            w.writerow([name, lab, i, j, lab[i], lab[j], f"{A[c, i, j]:.6g}"])


def pyplot() -> Any:
    """``matplotlib.pyplot`` for writing files: the Agg backend unless a session already chose
    one (pyplot imported, Jupyter's inline backend), which is then kept."""
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules and "IPython" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_attention_maps(mats: Mapping[str, np.ndarray], sequences: np.ndarray, path: str, dpi: int = 150) -> None:
    """Draw ``mats[name]`` (n_seq, T, T) as a grid: one row per name, one column per sequence."""
    plt = pyplot()
    seqs = np.asarray(sequences)
    names = list(mats)
    fig, axes = plt.subplots(len(names), len(seqs), figsize=(2.6 * len(seqs) + 1.0, 2.6 * len(names)), squeeze=False,
                             layout="constrained")
    im = None
    for r, name in enumerate(names):
        for c, seq in enumerate(seqs):
            ax = axes[r][c]
            im = ax.imshow(mats[name][c], vmin=0.0, vmax=1.0, cmap="viridis")
            ax.grid(False)
            lab = list(letters(seq))
            ax.set_xticks(range(len(lab)), lab, fontsize=7)
            ax.set_yticks(range(len(lab)), lab, fontsize=7)
            if c == 0:
                ax.set_ylabel(name)
            if r == 0:
                ax.set_title(letters(seq), fontsize=9)
    fig.suptitle("Histogram task: attention A (row i attends to column j)")
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.5, label="attention weight")
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def read_attention_maps(csv_path: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The matrices and sequences written by :func:`plot_attention_maps` (``csv_path``)."""
    import csv

    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    names = list(dict.fromkeys(r["model"] for r in rows))
    seq_labels = list(dict.fromkeys(r["sequence"] for r in rows))
    T = len(seq_labels[0])
    mats = {n: np.zeros((len(seq_labels), T, T)) for n in names}
    for r in rows:
        mats[r["model"]][seq_labels.index(r["sequence"]), int(r["i"]), int(r["j"])] = float(r["attention"])
    seqs = np.array([[ord(ch) - ord("A") for ch in lab] for lab in seq_labels])
    return mats, seqs


# --------------------------------------------------------------------------- CLI
class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m numerics.simulate histogram", description=__doc__.split("\n\n")[0],
                epilog="Example: python -m numerics.simulate histogram --init semantic --seeds 3 --json")
    d = HistogramConfig()
    p.add_argument("--init", required=True, help="positional or semantic (which query/key rows are frozen at 0)")
    p.add_argument("--seeds", type=int, default=1, help="number of seeds")
    p.add_argument("--seed-start", type=int, default=0, help="first seed")
    p.add_argument("--T", type=int, default=d.T, help="sequence length")
    p.add_argument("--alphabet", type=int, default=d.alphabet, help="number of tokens L")
    p.add_argument("--dim", type=int, default=d.dim, help="size D of each embedding half")
    p.add_argument("--hidden", type=int, default=d.hidden, help="feed-forward width")
    p.add_argument("--n-train", type=int, default=d.n_train)
    p.add_argument("--n-test", type=int, default=d.n_test)
    p.add_argument("--epochs", type=int, default=d.epochs, help="Adam epochs (frozen training)")
    p.add_argument("--lr", type=float, default=d.lr, help="Adam learning rate")
    p.add_argument("--perturb", type=float, default=d.perturb, help="std of the stability perturbation")
    p.add_argument("--sgd-epochs", type=int, default=d.sgd_epochs, help="SGD epochs of the stability check")
    p.add_argument("--sgd-lr", type=float, default=d.sgd_lr)
    p.add_argument("--no-stability", action="store_true", help="skip the perturbation + SGD check")
    p.add_argument("--no-residual", action="store_true", help="no residual connection around the attention")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--plot", metavar="PNG", help="also draw the first seed's attention maps (before and after the "
                                                 "stability check) on 3 test sequences")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


#: why a number of the JSON output can be null
JSON_REASONS = {
    "positional_index": "undefined: the attention is exactly uniform (zero variance)",
    "r2_position": "undefined: the attention is exactly uniform (zero variance)",
    "r2_token": "undefined: the attention is exactly uniform (zero variance)",
}


def _json(res: Mapping[str, Any]) -> str:
    from replica.artifacts import jsonio

    reasons = dict(JSON_REASONS)
    reasons.update({k + "_se": "a standard error needs at least two seeds" for k in
                    (*_SUMMARY_KEYS, "relative_parameter_change")})
    return jsonio.dumps(res, reasons, indent=1)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status (2 for bad input, 130/143 when interrupted)."""
    from numerics.checks import run_cli

    return run_cli(build_parser(), _run, argv)  # SIGTERM ends like Ctrl-C: one line, no traceback


def _run(args: argparse.Namespace, prog: str) -> int:
    try:
        if args.init not in INITS:
            raise ValueError(f"init must be one of {', '.join(INITS)} (got {args.init!r})")
        if args.seeds < 1:
            raise ValueError(f"seeds must be >= 1 (got {args.seeds})")
        if args.threads < 1:
            raise ValueError(f"threads must be >= 1 (got {args.threads})")
        cfg = HistogramConfig(T=args.T, alphabet=args.alphabet, dim=args.dim, dim_k=args.dim, hidden=args.hidden,
                              n_train=args.n_train, n_test=args.n_test, epochs=args.epochs, lr=args.lr,
                              perturb=args.perturb, sgd_epochs=args.sgd_epochs, sgd_lr=args.sgd_lr,
                              stability=not args.no_stability, residual=not args.no_residual)
        from numerics.simulate import resolve_device

        device = str(resolve_device(args.device))
        if args.plot:
            from replica.artifacts.outputs import check_output_file

            check_output_file(args.plot, "plot")  # before the training, not after
        res = run(args.init, args.seeds, cfg, seed_start=args.seed_start, device=device, threads=args.threads,
                  verbose=not args.quiet, keep_models=bool(args.plot))
        if args.plot:  # the first seed, before and after the stability check
            first = res["runs"][0]
            models = {f"{args.init} (frozen)": first.pop("model")}
            if "model_unfrozen" in first:
                models[f"{args.init} (after SGD)"] = first.pop("model_unfrozen")
            seqs, _ = sample_sequences(3, cfg.T, cfg.alphabet, np.random.default_rng(12345))
            plot_attention_maps(models, seqs, args.plot)
    except (ValueError, FloatingPointError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: one line
        from replica.runtime.workers import exit_status, interrupt_message

        print(interrupt_message(prog, e).replace("; rerun to resume", ""), file=sys.stderr)
        return exit_status(e)
    if args.json:
        print(_json(res))
    else:
        print(f"histogram task, init={args.init}, seeds={res['seeds']}, T={cfg.T}, alphabet={cfg.alphabet}")
        for k in ("test_accuracy", "test_sequence_accuracy", "positional_index", "r2_position", "r2_token"):
            print(f"  {k:<24} {_f(res[k])}" + (f" ± {res[k + '_se']:.3f}" if res[k + '_se'] is not None else ""))
        if cfg.stability:
            u = res["unfrozen"]
            print(f"  after perturbation + {cfg.sgd_epochs} SGD epochs: accuracy {_f(u['test_accuracy'])}, "
                  f"positional index {_f(u['positional_index'])}, |dtheta|/|theta| "
                  f"{_f(u['relative_parameter_change'])}")
        print(f"  CPU time {res['cpu_seconds']:.1f} s, wall {res['wall_seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
