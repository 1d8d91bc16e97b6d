"""Per-factor kernels of the code generator: models that use the same factor share one kernel file.

The generator writes each function into the kernel file of the factor it comes from
(replica.codegen.generator.FACTOR_OF), named by the hash of the file's text; the model's module
keeps its own functions and imports the rest. These tests pin the sharing on two pairs of GLMs
that differ in one factor, that the split module computes what the self-contained one does, and
that a missing or damaged kernel file is found (the cache regenerates the model; a direct import
is refused in one line).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from replica.codegen import generate_sources, write_module
from replica.errors import ParameterError
from replica.interface.generated_model import as_model, stale_kernels
from replica.registry import _import_path, load_model
from replica.symbolic.derivation import Derivation


def _keys(module_text: str) -> dict[str, str]:
    """factor -> kernel key imported by a split module."""
    return {k.split("-")[0]: k for k in re.findall(r'"([a-z]+-[0-9a-f]{16})"', module_text)}


@pytest.fixture(scope="module")
def sources():
    return {n: generate_sources(Derivation(load_model(n))) for n in ("ridge", "lasso", "logistic", "perceptron_probit")}


def test_models_with_the_same_factor_share_its_kernel_file(sources):
    """ridge and lasso differ in the penalty only, logistic and perceptron_probit in the channel only
    (sign vs probit teacher): every other factor's kernel file is the same file."""
    keys = {n: _keys(s.module) for n, s in sources.items()}
    assert set(keys["ridge"]) == {"trace", "penalty", "loss", "channel", "data"}
    # lasso's envelope adds entropic_from_gradient to its trace factor
    assert [f for f in keys["ridge"] if keys["ridge"][f] != keys["lasso"][f]] == ["trace", "penalty"]
    assert [f for f in keys["logistic"] if keys["logistic"][f] != keys["perceptron_probit"][f]] == ["channel"]
    assert keys["ridge"]["penalty"] != keys["logistic"]["penalty"]  # lam is parameter 1 in one, 0 in the other
    for s in sources.values():
        assert set(_keys(s.module).values()) == set(s.kernels)
        assert "def bracket(" not in s.module and "def bracket(" in s.bundled()


def test_the_split_module_computes_what_the_bundled_one_does(tmp_path, sources):
    """The cache's layout (module + kernels/) and the self-contained file give the same numbers."""
    derivation = Derivation(load_model("logistic"))
    split = as_model(_import_path(write_module(derivation, tmp_path / "cache" / "logistic.py", shared_kernels=True),
                                  prefix="split_"))
    bundled = as_model(_import_path(write_module(derivation, tmp_path / "out" / "logistic.py"), prefix="bundled_"))
    assert sorted(p.name for p in (tmp_path / "cache" / "kernels").iterdir()) == \
        sorted(f"{k}.py" for k in sources["logistic"].kernels)
    rng = np.random.default_rng(1)
    h, z = rng.normal(size=(1, 7)), rng.normal(size=(2, 7))
    z[1] = np.sign(z[1])  # z = (xi, y): the label
    x, p = np.array([0.8, 0.5, 0.3]), np.array(split.DEFAULTS, dtype=float)
    for name in ("bracket_newton", "bracket_parameter_gradient", "label_weight", "prox_starts", "test_observables"):
        args = (h, z, x, p) if name.startswith("bracket") else (z, x, p)
        a, b = getattr(split, name)(*args), getattr(bundled, name)(*args)
        np.testing.assert_array_equal(np.concatenate([np.ravel(u) for u in (a if isinstance(a, tuple) else (a,))]),
                                      np.concatenate([np.ravel(v) for v in (b if isinstance(b, tuple) else (b,))]))


def test_a_damaged_kernel_file_is_found(tmp_path):
    """stale_kernels names a kernel file that is missing or whose text does not hash to its name
    (load_module then regenerates the model); importing the module anyway is one line of error."""
    path = write_module(Derivation(load_model("ridge")), tmp_path / "ridge.py", shared_kernels=True)
    assert stale_kernels(path) == []
    loss = next((tmp_path / "kernels").glob("loss-*.py"))
    loss.write_text(loss.read_text().replace("return", "return 1 +", 1))
    assert stale_kernels(path) == [loss]
    from replica.interface import generated_model

    generated_model._KERNEL_MODULES.pop(loss.stem, None)
    with pytest.raises(ParameterError, match=r"factor kernels .*loss-.* are missing or damaged; regenerate"):
        _import_path(path, prefix="damaged_")
    loss.unlink()
    assert stale_kernels(path) == [loss]


def test_the_cache_regenerates_a_model_whose_kernel_file_is_damaged(tmp_path, monkeypatch):
    """load_module finds a model's kernel file missing or edited (stale_kernels), generates the model
    again and reads the restored file: a cache entry is fresh only with all of its factors' kernels."""
    from replica.interface import generated_model
    from replica.registry import loader

    monkeypatch.setenv("REPLICA_CACHE", str(tmp_path / "cache"))
    first = loader.load_module("ridge")
    assert first.path.is_relative_to(tmp_path / "cache") and stale_kernels(first.path) == []
    loss = next((first.path.parent / "kernels").glob("loss-*.py"))
    good = loss.read_text()
    loss.write_text(good.replace("return", "return 1 +", 1))
    monkeypatch.setattr(loader, "_LOADED", {})
    monkeypatch.setattr(generated_model, "_KERNEL_MODULES", {})
    again = loader.load_module("ridge")
    assert loss.read_text() == good and again.path == first.path
    p, z, x = np.array(again.DEFAULTS, dtype=float), np.zeros((3, 1)), np.array([0.7, 0.4, 0.3])
    np.testing.assert_array_equal(again.bracket(np.ones((1, 1)), z, x, p), first.bracket(np.ones((1, 1)), z, x, p))
