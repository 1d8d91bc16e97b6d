"""Shared fixtures: the generated models are loaded once (they need no sympy)."""
from __future__ import annotations

import warnings

import pytest


@pytest.fixture(scope="session")
def attention():
    from replica.registry import load_module

    return load_module("attention_tied")


@pytest.fixture(scope="session")
def ridge():
    from replica.registry import load_module

    return load_module("ridge")


@pytest.fixture(scope="session", autouse=True)
def _generated_modules(request):
    """Every declared model's module in the cache before the first test of each worker: generated
    modules are a build product (replica.registry), and a clean clone's first use of a model prints
    one line saying it generates it -- which a test that reads a command's stderr must not see. The
    workers take the models in rotated orders, so that on a cold cache they generate different
    models side by side (the registry's lock makes each one generated once)."""
    from replica.registry import declared_models, load_module

    names = declared_models()
    worker = getattr(request.config, "workerinput", {}).get("workerid", "gw0")
    k = int(worker[2:]) * len(names) // 2 if worker[2:].isdigit() else 0
    for name in names[k % len(names):] + names[:k % len(names)]:
        load_module(name)


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test (``pytestmark = pytest.mark.usefixtures("one_torch_thread")``): the
    simulator tests train tiny tensors, faster on one thread, and keep the shared machine usable."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(autouse=True)
def _quiet_overflow():
    # Saturated softmax exponentials overflow harmlessly in the generated code.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def pytest_configure(config):
    # CI (CI=true) also runs the slow checks: the whole suite took 57.6 min on 2 cores in one process on
    # 2026-11-27 (CI's limit is 90), before code generation got ~5x faster (replica/codegen/dag.py) and before
    # -n auto; CONTRIBUTING.md says what was measured since and where the time goes. Locally the default stays
    # fast (addopts: -m 'not slow'); an explicit -m wins.
    import os

    if os.environ.get("CI", "").lower() == "true" and config.option.markexpr == "not slow":
        config.option.markexpr = ""
    # pytest-xdist (addopts: -n auto) runs the tests in one worker process per CPU. Each worker's compiled
    # averages, and the CLI processes it starts, then run on its share of the CPUs instead of all of them
    # (REPLICA_THREADS; the sums do not depend on the thread count, replica.numeric.energetic.chunk_map).
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if workers.isdigit() and int(workers) > 1:
        from replica.runtime.executors import available_cpus

        os.environ.setdefault("REPLICA_THREADS", str(max(1, available_cpus() // int(workers))))


def pytest_collection_modifyitems(config, items):
    # The long checks first (stable order otherwise): xdist then shares them between the workers instead of
    # leaving the last of them to one worker while the other idles.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
