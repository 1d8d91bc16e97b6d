"""Issue 15: one algorithm, one place -- the generic core, thin generated modules, freshness,
observables as declarations, applications on top, and the layering that keeps it so."""
from __future__ import annotations

import ast
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from replica.errors import ParameterError
from tests.support import run_cli

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "replica"




# --------------------------------------------------------------------------- layering
#: the packages whose import graph the layering rules read (the library, the simulator, the benchmarks)
PACKAGES = ("replica", "numerics", "benchmarks")
def _module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _files():
    return [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]


_KNOWN: set[str] = set()


def _imports(path: Path, root: Path = ROOT) -> set[str]:
    """What ``path`` imports anywhere in its code (function-level imports included), resolved: the
    modules of :data:`PACKAGES` and ``derivations``, and the top-level name of any other package."""
    if not _KNOWN:
        _KNOWN.update(_module_name(p) for p in _files())
    tree = ast.parse(path.read_text())
    pkg = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        pkg = pkg[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[:len(pkg) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return {m for m in out if m in _KNOWN or m.startswith("derivations")} | {
        m.split(".")[0] for m in out if m.split(".")[0] not in PACKAGES + ("derivations",)}


def _graph() -> dict[str, set[str]]:
    """Module -> the modules it imports, any import anywhere in its code (no allow-list). An
    import of one's own ancestor package (``from . import x``) runs nothing new: Python has
    initialised the ancestors before the module, so that edge is left out; a package importing
    its submodules (re-exports) is an edge like any other."""
    return {(name := _module_name(p)): {d for d in _imports(p) if d != name and not name.startswith(d + ".")}
            for p in _files()}


def _cycle(graph) -> list[str] | None:
    """One import cycle of ``graph``, or None."""
    state: dict[str, int] = {}

    def visit(n, stack):
        state[n] = 1
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                return stack + [n, d]
            if state.get(d) is None:
                found = visit(d, stack + [n])
                if found:
                    return found
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n, [])
            if found:
                return found
    return None


def test_no_import_cycles():
    """Imports between the modules of replica, numerics and benchmarks form a DAG -- imports inside
    functions count like the others, with no exception list; so do a package's imports of its own
    submodules (importing the package runs them)."""
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter on the tree at ``root``: the contracts of its pyproject.toml ([tool.importlinter])."""
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                           "sys.exit(lint_imports_command())", "--no-cache"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_the_layer_contract_holds():
    """The package-level order of the library is a declared contract (pyproject.toml,
    [tool.importlinter]: cli > applications > sweep > phase > registry > codegen > symbolic | numeric >
    interface > runtime | artifacts | simulators > validation > errors; no sympy below the registry;
    the library names no simulator, declaration or benchmark package), checked by import-linter over
    every import, those inside functions included."""
    res = _lint_imports(ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout


def test_the_contract_fails_on_an_upward_import(tmp_path):
    """The contract can fail: in a copy of the tree with one upward import added, inside a function
    (the numerics reaching for the registry, above them), import-linter names it and exits non-zero."""
    import shutil

    for name in ("replica", "numerics", "benchmarks", "derivations"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert _lint_imports(tmp_path).returncode == 0   # the copy itself holds
    leak = tmp_path / "replica" / "numeric" / "prox.py"
    leak.write_text(leak.read_text() + "\n\ndef _leak():\n    from ..registry import load_module\n    return load_module\n")
    res = _lint_imports(tmp_path)
    assert res.returncode != 0
    assert "the library's layers BROKEN" in res.stdout
    assert "replica.numeric.prox -> replica.registry" in res.stdout


def test_core_knows_no_application():
    """The generic core never imports an application package nor the derivations folder (the
    applications are found by :mod:`replica.applications` at run time, by name); no core module
    names the attention study's branches or parameter in its code."""
    for p in LIB.rglob("*.py"):
        name = _module_name(p)
        if name.startswith("replica.applications.") or name == "replica.applications":
            continue
        deps = _imports(p)
        bad = {d for d in deps if d.startswith(("replica.applications.", "derivations"))}
        assert not bad, f"{name} imports {sorted(bad)}"
        words = _code_strings(p) & {"semantic", "positional", "agnostic", "omega"}
        assert not words, f"{name} names the attention study's {sorted(words)} in its code"


def _code_strings(path: Path) -> set[str]:
    """String constants of a module's code (docstrings, which may cite the paper, left out)."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs}


def test_numeric_cli_path_imports_no_sympy(ridge):
    """A solve of a model whose module is in the cache (the fixture put it there) imports no sympy."""
    code = ("import sys; sys.modules['sympy'] = None\n"
            "from replica.cli import main\n"
            "rc = main(['solve', 'ridge', '--alpha', '1', '--branch', 'centered', '--quadrature', 'gh:8', '--json'])\n"
            "assert rc == 0\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout)["converged"] is True


# --------------------------------------------------------------------------- thin modules, compiled unit
def test_generated_modules_are_thin(attention, ridge):
    """A generated module holds the model's mathematics only: the generic kernels live once, in the library."""
    import replica.numeric.kernels as kernels

    for p in [attention.path, ridge.path, *(ROOT / "tests" / "golden").glob("[!_]*.py")]:
        text = p.read_text()
        for name in kernels.KERNEL_NAMES:
            assert f"def {name}(" not in text, f"{p.name} defines the generic kernel {name}"


def test_compiled_unit_is_assembled_in_the_cache(attention, ridge, tmp_path, monkeypatch):
    from replica.numeric import compiled

    monkeypatch.delenv("REPLICA_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    name, text = compiled.unit_source(attention)
    # keyed by both halves: the model's leaves and the generic kernels
    leaves_hash, kernel_hash = name[:-3].split("-")[-2:]
    assert name.startswith("attention_tied-") and len(leaves_hash) == len(kernel_hash) == 12
    assert compiled.kernel_source() in text and "def node_bracket_newton(" in text
    unit = compiled.load_unit(attention)
    assert Path(unit.__file__).parent == tmp_path / "xdg" / "replica" / "compiled"
    assert compiled.unit_source(ridge)[0].split("-")[-1] == name.split("-")[-1]  # same kernels
    assert compiled.unit_source(ridge)[0].split("-")[1] != leaves_hash


def test_generated_model_interface_is_checked_at_load(tmp_path, ridge):
    """load_module returns the typed interface: every function once in the module (kernel form),
    the vectorised ones built from the kernels equal to the compiled unit's leaves run in plain
    Python; a module that lacks a piece is refused with one line naming it."""
    from replica.numeric.compiled import compiled
    from replica.interface.generated_model import GeneratedModel
    from replica.registry import _import_path, generated_path

    assert isinstance(ridge, GeneratedModel) and ridge.bracket_newton is not None and ridge.entropic_argmin is None
    text = generated_path("ridge").read_text()
    assert text.count("def ") == len(set(re.findall(r"^def (\w+)", text, re.M)))  # each function once
    unit = compiled(ridge, jit=False)
    rng = np.random.default_rng(0)
    h, z = rng.normal(size=(1, 5)), rng.normal(size=(3, 5))
    x, p = np.array([0.7, 0.4, 0.3]), np.array(ridge.DEFAULTS, dtype=float)  # q, V, theta
    F, g, H = ridge.bracket_newton(h, z, x, p)
    for j in range(5):
        c, gj, Hj = np.empty(ridge.N_CONSTANTS), np.empty(1), np.empty(1)
        unit.node_constants(z[:, j], x, p, c)
        assert unit.node_bracket_newton(h[:, j], c, gj, Hj) == pytest.approx(F[j], rel=1e-14)
        assert gj[0] == pytest.approx(g[0, j], rel=1e-14) and Hj[0] == pytest.approx(H[0, j], rel=1e-14)
    broken = tmp_path / "ridge_broken.py"
    broken.write_text(re.sub(r"^PROX_DIM = .*$", "", text, flags=re.M))
    with pytest.raises(ParameterError, match=r"has no PROX_DIM; regenerate it \(replica generate ridge\)"):
        GeneratedModel.from_module(_import_path(broken))


# --------------------------------------------------------------------------- freshness
RIDGE = (ROOT / "derivations" / "ridge.py").read_text()


def _solve_json(decl: Path, *extra, env=None):
    res = run_cli("solve", str(decl), "--alpha", "1.5", "--branch", "centered", "--quadrature", "gh:10", "--json",
                  *extra, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), res.stderr


def test_editing_a_declaration_regenerates_its_module(tmp_path):
    """The bug of issue 15: after an edit of the loss, `replica solve file.py` reused the stale module.
    Modules are named in the cache by their declaration's hash: an edit names another one."""
    decl = tmp_path / "myridge.py"
    decl.write_text(RIDGE)
    # a cache of its own (its first use generates), on the numpy backend (no compile of the unit there)
    env = dict(os.environ, REPLICA_CACHE=str(tmp_path / "cache"), REPLICA_BACKEND="numpy")
    first, err = _solve_json(decl, env=env)
    assert "generating" in err and "first use" in err
    cached = list((tmp_path / "cache" / "generated").glob("myridge-*.py"))
    assert len(cached) == 1 and not (tmp_path / "generated").exists()   # nothing beside the user's file
    again, err = _solve_json(decl, env=env)
    assert "generating" not in err and again["eps_g"] == first["eps_g"]       # fresh: reused
    # double the loss: the fixed point moves (the data term weighs twice the penalty), and the new
    # numbers are those of the regenerated module
    decl.write_text(RIDGE.replace("loss=sp.Rational(1, 2) * ", "loss="))
    edited, err = _solve_json(decl, env=env)
    assert "declaration changed" in err
    assert edited["q"] != pytest.approx(first["q"], rel=1e-6)
    from replica.numeric.quadrature import gauss_hermite
    from replica.registry import _import_path
    from replica.numeric.solver import Solver

    (new,) = set((tmp_path / "cache" / "generated").glob("myridge-*.py")) - set(cached)
    mod = _import_path(new, prefix="check_")
    fp = Solver(mod, branch="centered", rule=gauss_hermite(3, 10)).solve(1.5)
    assert edited["eps_g"] == pytest.approx(fp.eps_g, rel=1e-6)   # both solved to tol 1e-8


def test_a_cache_that_cannot_be_written_still_serves(tmp_path, monkeypatch):
    """Where the cache cannot be written (a read-only home) the module is generated into a temporary
    folder of this process, not refused. (The test runs as root on CI, which writes anywhere: the
    permission check itself is what is made to say no.)"""
    import replica.artifacts.cache as cache
    import replica.registry as registry

    monkeypatch.setenv("REPLICA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cache.os, "access", lambda path, mode: False)
    decl = tmp_path / "ro_ridge.py"
    decl.write_text(RIDGE)
    module = registry.load_module(str(decl))
    assert module.MODEL == "ridge" and not module.path.is_relative_to(tmp_path / "cache")


def test_concurrent_first_uses_generate_once(tmp_path):
    """Two processes that load the same model into an empty cache at once (test or sweep workers):
    one generates it, under the lock, the other waits and reads the whole module; both succeed."""
    decl = tmp_path / "racy_ridge.py"
    decl.write_text(RIDGE)
    env = dict(os.environ, REPLICA_CACHE=str(tmp_path / "cache"))
    code = "import sys\nfrom replica.registry import load_module\nprint(load_module(sys.argv[1]).MODEL)\n"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(decl)], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
    assert [o.strip() for o, _ in outs] == ["ridge", "ridge"]
    assert sum(e.count("generating") for _, e in outs) == 1
    assert len(list((tmp_path / "cache" / "generated").glob("racy_ridge-*.py"))) == 1


def test_stamps_track_declaration_imports(tmp_path):
    """A declaration's hash follows the local modules it imports (e.g. a shared constants file)."""
    from replica.artifacts.freshness import declaration_files, declaration_hash

    (tmp_path / "shared_consts.py").write_text("LAM = 0.1\n")
    decl = tmp_path / "user_model.py"
    decl.write_text("from shared_consts import LAM\nimport numpy as np\n")
    assert {p.name for p in declaration_files(decl)} == {"user_model.py", "shared_consts.py"}
    h1 = declaration_hash(decl)
    (tmp_path / "shared_consts.py").write_text("LAM = 0.2\n")
    assert declaration_hash(decl) != h1
    # the attention declarations follow the study's constants, not the library
    names = {p.name for p in declaration_files(ROOT / "derivations" / "attention_L3.py")}
    assert names == {"attention_L3.py", "paper.py"}


def test_generator_hash_reads_code_not_docstrings():
    """The generator hash covers the files of the generator's packages that the writer imports (found
    by following imports: the LaTeX writer is not part of a module's) and reads their code only: a
    docstring or comment edit leaves every artifact fresh, a code edit not."""
    from replica.artifacts.freshness import LIBRARY, code_digest, generator_files

    files = {p.relative_to(LIBRARY).as_posix() for p in generator_files("module")}
    assert {"codegen/generator.py", "codegen/backends.py", "symbolic/derivation.py"} <= files
    assert "symbolic/latex.py" not in files and "symbolic/latex.py" in {
        p.relative_to(LIBRARY).as_posix() for p in generator_files("export")}
    src = 'def f(x):\n    """Square."""\n    return x * x  # fast\n\n\nclass A:\n    """Doc."""\n'
    same = '# header\ndef f(x):\n    """Square ψ,\n    twice."""\n    return x * x\n\n\nclass A:\n    """Other."""\n'
    assert code_digest(src.encode()) == code_digest(same.encode())
    assert code_digest(src.encode()) != code_digest(src.replace("x * x", "x * x * x").encode())


# --------------------------------------------------------------------------- observables
OBSERVED = RIDGE.replace("from replica import L2,", "from replica import L2, TestObservable,").replace(
    '    branches={"centered": ("m",)},',
    '    branches={"centered": ("m",)},\n'
    '    observables=[TestObservable("overlap", hs[0] * h[0], r"\\rho_{h h^*}", "test overlap"),\n'
    '                 TestObservable("mse", (h[0] - hs[0]) ** 2, description="test squared error")],')


def test_declared_observables_reach_solver_json_latex_and_phase(tmp_path):
    """Two test-point observables declared in a copy of ridge: their closed forms at the test point,
    E[h h*] = theta and E[(h - h*)^2] = q - 2 theta + rho (m = 0, rho = 1), come out of the same
    generated code, solver, JSON and phase output as eps_g, with no code for either."""
    decl = tmp_path / "observed_ridge.py"
    decl.write_text(OBSERVED)
    out, _ = _solve_json(decl)
    q, th = out["q"], out["theta"]
    # gh:10 on a quadratic integrand is exact up to round-off; <name>_error is the full error bar
    # (issue 14: re-solved on refined rules, what the iteration left included), as in "errors"
    assert out["overlap"] == pytest.approx(th, rel=1e-10)
    assert out["overlap_error"] == out["errors"]["overlap"] < 1e-8 * th
    assert out["mse"] == pytest.approx(q - 2 * th + 1.0, rel=1e-10)
    assert list(out)[list(out).index("eps_g"):][:6] == ["eps_g", "eps_g_error", "overlap", "overlap_error",
                                                          "mse", "mse_error"]
    from replica import Derivation
    from replica.symbolic.latex import markdown_document
    from replica.phase import SolverSettings, follow_branch
    from replica.registry import load_model, load_module

    md = markdown_document(Derivation(load_model(str(decl))))
    assert r"\rho_{h h^*} &= \mathbb{E}\left[" in md and "test squared error" in md
    mod = load_module(str(decl))
    assert mod.OBSERVABLES == ("eps_g", "overlap", "mse")
    curve = follow_branch(mod, "centered", 1.0, 1.3, settings=SolverSettings(rule="gh:10"))
    arr = curve.arrays()
    assert len(arr["overlap"]) == len(curve) and len(arr["mse_error"]) == len(curve)
    np.testing.assert_allclose(arr["overlap"], curve.values("theta"), rtol=1e-9)


def test_entropic_observable_at_the_entropic_prox(tmp_path):
    """An entropic observable -- the fraction of exactly-zero weights of an elastic net -- is averaged
    at the entropic minimiser: soft thresholding zeroes ``w`` exactly where ``|Z| <= lam1``,
    ``Z ~ N(0, thetahat^2 + qhat)``, so it equals the Gaussian closed form ``erf(lam1 / sqrt(2 s^2))``;
    the default entropic rule (aligned with the prox's kinks, exact on the flat piece) gives it to
    round-off, within the reported error bar."""
    text = RIDGE.replace("from replica import L2,", "from replica import L2, ElasticNet, EntropicObservable, symbol,")
    text = text.replace("    regularizer=L2(lam),", "    regularizer=ElasticNet(lam1, lam),\n"
                        "    observables=[EntropicObservable('zero_fraction', sp.Piecewise((1, sp.Eq(w, 0)), (0, True)),"
                        " w=[w])],")
    line = next(ln for ln in text.splitlines() if ln.startswith('lam = parameter("lam"'))
    text = text.replace(line, line + '\nlam1 = parameter("lam1", r"\\lambda_1")\nw = symbol("w")')
    text = text.replace("parameters={delta: 0.25, lam: 0.1},", "parameters={delta: 0.25, lam: 0.1, lam1: 0.3},")
    decl = tmp_path / "sparse_ridge.py"
    decl.write_text(text)
    out, _ = _solve_json(decl)
    qh, thh = out["qhat"], out["thetahat"]
    exact = math.erf(0.3 / math.sqrt(2 * (qh + thh ** 2)))
    assert abs(out["zero_fraction"] - exact) < 1e-12
    assert out["errors"]["zero_fraction"] >= 0 and out["accuracy_met"] is True


# --------------------------------------------------------------------------- a new model's phase crossing
NEW_MODEL = textwrap.dedent('''
    """Linear attention S(h) = h h^T on a target mixing the teacher's signal and a positional contrast,
    T(h*) = (1 - mix) h* h*^T + mix c [[1, -1], [-1, 1]]: learn the content (m = 0) or the places
    (theta = 0). Declared here only: nothing in the library knows its names."""
    import sympy as sp

    from replica import L2, Domain, Model, TokenReduction, TokenStatistics, fields, parameter, teacher_fields

    h, hs = fields(2, 1), teacher_fields(2, 1)
    mix, c, sigma, lam = (parameter(n) for n in ("mix", "c", "sigma", "lam"))
    model = Model(
        name="content_place",
        description="linear attention on a signal + positional-contrast target (a test model)",
        h=h, hstar=hs,
        student=h * h.T,
        target=(1 - mix) * hs * hs.T + mix * c * sp.Matrix([[1, -1], [-1, 1]]),
        data=TokenStatistics.isotropic(2, sigma ** 2, positional=(1, -1)),
        regularizer=L2(lam),
        parameters={mix: 0.5, c: 0.25, sigma: 0.5, lam: 0.01},
        domains={mix: Domain(0, 1), sigma: Domain(0, None), lam: Domain(0, None)},
        reduction=TokenReduction({"q": [1, 1], "V": [1, 1], "theta": [1, 1], "m": [1, -1]}),
        branches={"content": ("m",), "place": ("theta",), "neither": ("m", "theta")},
        transition=("content", "place"),
        baseline="linear",
    )
''')


def test_new_model_gets_its_phase_crossing_from_the_core(tmp_path, monkeypatch):
    """A brand-new model with two branches, declared in a temporary file: its symmetries are derived,
    and alpha_c comes from the same code path as the attention study's (replica.phase), through
    the API and the `replica phase` command. At alpha_c both branches are solved and their free
    entropies agree to the root finder's xtol times the slope dPhi/dalpha; at alpha_l the content
    branch's test error is the linear baseline's."""
    from replica.phase import CrossingStatus, SolverSettings, phase_point
    from replica.registry import load_module

    monkeypatch.setenv("REPLICA_BACKEND", "numpy")   # a 4-D rule of 6^4 nodes: no compile needed
    decl = tmp_path / "content_place.py"
    decl.write_text(NEW_MODEL)
    mod = load_module(str(decl))
    assert mod.SYMMETRIES == ((("m",), (0, 1, 2, 3)), (("theta",), (2, 3))) and mod.MIRRORED == (True, False)
    assert mod.TRANSITION == ("content", "place") and mod.BASELINE == "linear"
    settings = SolverSettings(rule="gh:6")
    r = phase_point(mod, {}, thresholds_only=True, settings=settings)
    assert r.pair == ("content", "place") and r.alpha_c.status is CrossingStatus.ROOT, r.alpha_c
    ac = r.alpha_c.value
    assert 0.1 < ac < 4.0 and "Phi_content - Phi_place" in r.alpha_c.reason
    # the root finder's last solves, on both branches, within xtol of alpha_c
    pc, pp = (min(r.curves[b].points, key=lambda q: abs(q.alpha - ac)) for b in ("content", "place"))
    assert abs(pc.alpha - ac) < 2e-3 and pc.alpha == pp.alpha
    assert abs(pc.phi - pp.phi) <= abs(pc.psi_y - pp.psi_y) * 2 * 1e-4 + 1e-12
    assert r.alpha_l.status is CrossingStatus.ROOT and r.alpha_l.value > ac, r.alpha_l
    pl = min(r.curves["content"].points, key=lambda q: abs(q.alpha - r.alpha_l.value))
    assert abs(pl.eps_g - r.eps_lin) < 1e-5 * max(1.0, r.eps_lin) + abs(pl.alpha - r.alpha_l.value)
    # the merge structure is derived from the pinned sets: both branches merge into "neither"
    from replica.numeric.branches import defining_families, merge_target

    assert [merge_target(mod, b) for b in ("content", "place")] == ["neither", "neither"]
    assert defining_families(mod, "content") == ["theta"] and defining_families(mod, "place") == ["m"]
    res = run_cli("phase", str(decl), "--quadrature", "gh:6", "--thresholds-only", "--no-cache", "--json", "--quiet",
                  env=dict(os.environ, REPLICA_BACKEND="numpy"))
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["pair"] == ["content", "place"] and d["alpha_c"] == pytest.approx(ac, abs=1e-9)
    assert d["crossings"]["alpha_c"]["status"] == "root"


# --------------------------------------------------------------------------- one definition, theory and simulator
def test_simulator_maps_match_the_declaration():
    """The simulator's torch student and target (kept in torch for a stable softmax) compute the
    declaration's S(h) and T(h*): lambdified from the same sympy matrices, they agree."""
    torch = pytest.importorskip("torch")
    import sympy as sp

    from numerics.data import MixedTarget, softmax_row_gram
    from replica.applications.attention.paper import PAPER_A
    from replica.registry import load_model

    m = load_model("attention_tied")
    d = {s.name: v for s, v in m.defaults.items()}
    S = sp.lambdify(list(m.h), m.student.subs(m.defaults), "numpy")
    T = sp.lambdify(list(m.hstar), m.target.subs(m.defaults), "numpy")
    rng = np.random.default_rng(0)
    h = rng.normal(size=(5, 2, 1)) * 2
    S_torch = softmax_row_gram(torch.tensor(h)).numpy()
    T_torch = MixedTarget(d["omega"], PAPER_A)(torch.tensor(h)).numpy()
    for k in range(5):
        np.testing.assert_allclose(S(*h[k, :, 0]), S_torch[k], rtol=1e-12)
        np.testing.assert_allclose(T(*h[k, :, 0]), T_torch[k], rtol=1e-12)


def test_simulator_regularizers_are_the_theorys():
    torch = pytest.importorskip("torch")
    from numerics.train import L2, ElasticNet

    W = torch.tensor(np.random.default_rng(1).normal(size=(7, 2)))
    assert float(L2(0.3)(W)) == pytest.approx(0.15 * float((W * W).sum()), rel=1e-14)
    en = ElasticNet(0.2, 0.1)
    assert float(en(W)) == pytest.approx(0.2 * float(W.abs().sum()) + 0.05 * float((W * W).sum()), rel=1e-14)
    ref = torch.sign(W) * torch.clamp(W.abs() - 0.5 * 0.2, min=0.0)
    assert torch.equal(en.prox(W, 0.5), ref)   # the theory's closed-form prox: soft thresholding
    assert en.has_prox and not L2(0.1).has_prox
