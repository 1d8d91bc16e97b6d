"""Code-generation backends: each turns the model's functions (:class:`Function`) into source text.

The generator (:mod:`replica.codegen.generator`) describes *what* the model computes -- the
bracket and its derivatives, the envelope gradient, the prox starts, the test-point
observables, the entropic update... -- once, as backend-neutral :class:`Function` specs. A
:class:`Backend` decides *how* that reads in code:

* :class:`NumpyBackend` -- vectorised numpy over arrays of quadrature nodes (the section every
  generated module has; :class:`replica.numeric.solver.Solver` runs it with ``backend="numpy"`` and for
  everything outside the inner minimisation);
* :class:`NodeBackend` -- per-node scalar leaves over ``math`` for the functions that have a
  :class:`NodeForm`; :mod:`replica.numeric.compiled` compiles them with the generic kernels of
  :mod:`replica.numeric.kernels` (``backend="numba"``). Optional: a module generated without it runs
  on the numpy path.

``generate_module(derivation, backends=[...])`` selects them; a new backend (e.g. C, or torch)
implements :meth:`Backend.section`.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Sequence

import sympy as sp

from .dag import cse, free_symbols
from .printers import ArrayPrinter, ScalarPrinter, hoist, share_exponentials, share_reciprocals


@dataclass(frozen=True)
class NodeForm:
    """The per-node variant of a :class:`Function` (for :class:`NodeBackend`).

    ``targets`` has one entry per output block of the function: ``None`` for a scalar the node
    function returns, or the name of an array argument it fills. ``split``: ``(name, doc)`` of a
    second function that computes, once per node, every subexpression free of the first
    argument's symbols (e.g. the target ``T(h*)`` inside the bracket), which the main function
    then reads from ``_c`` (see :func:`~replica.codegen.printers.hoist`).
    """

    name: str
    targets: tuple[str | None, ...]
    doc: str
    split: tuple[str, str] | None = None


@dataclass(frozen=True)
class Function:
    """One function of the generated module, independent of the backend.

    ``args``: ``(argument name, symbols it unpacks)``; ``outputs``: output blocks, each a bare
    expression (one value per node) or a list of expressions (stacked on a leading axis);
    ``node_args``: the arguments that carry trailing node axes (numpy broadcasting);
    ``node``: the per-node variant, if the compiled path needs one; ``delegate``: ``(function,
    k)`` when the outputs are entry ``k`` of another function's stacked output with the same
    arguments (written as a call, not a second copy of the code).
    """

    name: str
    args: tuple[tuple[str, tuple[sp.Symbol, ...]], ...]
    outputs: tuple
    doc: str
    node_args: tuple[str, ...] = ()
    node: NodeForm | None = None
    delegate: tuple[str, int] | None = None

    @staticmethod
    def make(name: str, args, outputs, doc: str, node_args=(), node: NodeForm | None = None,
             delegate: tuple[str, int] | None = None) -> "Function":
        """Build a spec from lists (argument symbol lists and output blocks are frozen)."""
        return Function(name, tuple((a, tuple(s)) for a, s in args),
                        tuple(tuple(b) if isinstance(b, list) else b for b in outputs), doc, tuple(node_args), node,
                        delegate)

    @property
    def blocks(self) -> list[tuple[list[sp.Expr], bool]]:
        """``(expressions, stacked)`` per output block."""
        return [(list(b), True) if isinstance(b, tuple) else ([b], False) for b in self.outputs]


class Backend:
    """A code-generation backend: the source text of a module section from :class:`Function` specs."""

    name = "abstract"

    def section(self, functions: Sequence[Function]) -> str:
        """Source of this backend's part of the module (``""`` if it has nothing to write)."""
        raise NotImplementedError


class NumpyBackend(Backend):
    """Vectorised numpy code: every node array is processed at once, no Python loops."""

    name = "numpy"

    def __init__(self) -> None:
        self.printer = ArrayPrinter({"fully_qualified_modules": True, "inline": True,
                                     "allow_unknown_functions": False})

    def _p(self, e: sp.Expr) -> str:
        return self.printer.doprint(e)

    def section(self, functions: Sequence[Function]) -> str:
        """Every function, in order."""
        return "\n\n".join(self.function(f) for f in functions)

    def function(self, fn: Function) -> str:
        """A block that is a bare expression is returned as an array of the node shape (or a
        float without node arguments); a block that is a list is stacked on a new leading axis,
        even when it has a single entry."""
        names = ", ".join(a for a, _ in fn.args)
        if fn.delegate is not None:
            other, k = fn.delegate
            return (f"def {fn.name}({names}):\n" + textwrap.indent(f'"""{fn.doc}"""', "    ")
                    + f"\n    return {other}({names})[{k}]\n")
        blocks = fn.blocks
        flat = [sp.sympify(e) for exprs, _ in blocks for e in exprs]
        replacements, reduced = cse(flat, sp.numbered_symbols("_t"))
        lines = [f"def {fn.name}({', '.join(a for a, _ in fn.args)}):", textwrap.indent(f'"""{fn.doc}"""', "    ")]
        used = free_symbols(flat) | free_symbols([e for _, e in replacements])
        for arg, syms in fn.args:
            syms = list(syms)
            if not syms or not any(s in used for s in syms):
                continue
            names = [s.name if s in used else "_" for s in syms]
            target = ", ".join(names) + ("," if len(names) == 1 else "")
            lines.append(f"    {target} = {arg}")
        if fn.node_args:
            shape_src = ", ".join(f"np.shape({a}[0])" for a in fn.node_args)
            lines.append(f"    _shape = np.broadcast_shapes({shape_src})")
        for s, e in replacements:
            lines.append(f"    {s.name} = {self._p(e)}")
        pos = 0
        results = []
        for bi, (exprs_b, is_stack) in enumerate(blocks):
            exprs = reduced[pos:pos + len(exprs_b)]
            pos += len(exprs_b)
            var = f"_out{bi}"
            if not is_stack:
                if fn.node_args:
                    lines.append(f"    {var} = np.empty(_shape)")
                    lines.append(f"    {var}[...] = {self._p(exprs[0])}")
                else:
                    lines.append(f"    {var} = {self._p(exprs[0])}")
            else:
                shape = f"({len(exprs_b)},) + _shape" if fn.node_args else f"({len(exprs_b)},)"
                lines.append(f"    {var} = np.empty({shape})")
                for i, e in enumerate(exprs):
                    lines.append(f"    {var}[{i}] = {self._p(e)}")
            results.append(var)
        lines.append(f"    return {', '.join(results)}")
        return "\n".join(lines) + "\n"


class NodeBackend(Backend):
    """Per-node scalar leaves for the compiled kernels (see :mod:`replica.numeric.kernels`).

    Each function handles one quadrature node: arguments are 1-d sequences (``h``, ``z``,
    ``x``, ``p``), array outputs are filled in place, scalars are returned. Plain Python over
    ``math``; :mod:`replica.numeric.compiled` compiles it with numba.
    """

    name = "node"

    def __init__(self) -> None:
        self.printer = ScalarPrinter({"fully_qualified_modules": True, "inline": True})

    def _p(self, e: sp.Expr) -> str:
        return self.printer.doprint(e)

    def section(self, functions: Sequence[Function]) -> str:
        """The leaves of every function with a :class:`NodeForm`, after a header that defines
        ``N_CONSTANTS`` (per-node constants of the split functions) and the scalar ``_sexp``."""
        chunks = []
        n_constants = 0
        for fn in functions:
            if fn.node is None:
                continue
            outputs = [(t, exprs) for t, (exprs, _) in zip(fn.node.targets, fn.blocks)]
            if fn.node.split is not None:
                src, n_constants = self.split_function(fn.node.split[0], fn.node.name, fn.args[0], fn.args[1:],
                                                       outputs, fn.node.split[1], fn.node.doc)
                chunks.append(src)
            else:
                chunks.append(self.function(fn.node.name, fn.args, outputs, fn.node.doc))
        if not chunks:
            return ""
        header = f'''# ---------------------------------------------------------------------------------------
# Per-node leaves: scalar code for one quadrature node (math only). replica.numeric.compiled assembles
# them with the generic kernels of replica.numeric.kernels into a compiled unit (numba, cached on disk);
# the solver then uses it instead of the numpy functions above.

N_CONSTANTS = {n_constants}


def _sexp(u):
    """Scalar exp with the exponent capped at EXP_CAP (see _exp)."""
    return math.exp(min(u, EXP_CAP))
'''
        return header + "\n\n" + "\n\n".join(chunks)

    @staticmethod
    def _loads(args, used) -> list[str]:
        lines = []
        for arg, syms in args:
            for i, s in enumerate(syms):
                if s in used:
                    lines.append(f"    {s.name} = {arg}[{i}]")
        return lines

    def function(self, name, args, outputs, doc) -> str:
        """``outputs``: list of ``(target, exprs)``; ``target`` None returns the single
        expression, otherwise the expressions are written into the array argument ``target``."""
        flat = [share_reciprocals(share_exponentials(sp.sympify(e))) for _, block in outputs for e in block]
        reps, reduced = cse(flat, sp.numbered_symbols("_t"))
        used = free_symbols(flat)
        targets = [t for t, _ in outputs if t is not None]
        lines = [f"def {name}({', '.join([a for a, _ in args] + targets)}):", f'    """{doc}"""']
        lines += self._loads(args, used)
        lines += [f"    {s.name} = {self._p(e)}" for s, e in reps]
        lines += self._outputs(outputs, reduced)
        return "\n".join(lines) + "\n"

    def _outputs(self, outputs, reduced) -> list[str]:
        lines, ret, pos = [], "0.0", 0
        for target, block in outputs:
            exprs = reduced[pos:pos + len(block)]
            pos += len(block)
            if target is None:
                ret = self._p(exprs[0])
            else:
                lines += [f"    {target}[{i}] = {self._p(e)}" for i, e in enumerate(exprs)]
        lines.append(f"    return {ret}")
        return lines

    def split_function(self, const_name, name, h_args, const_args, outputs, doc_const, doc):
        """Two functions: ``const_name(*const_args, _c)`` computes, once per node, every
        subexpression independent of ``h_args`` (see :func:`~replica.codegen.printers.hoist`)
        into ``_c``; ``name(_h, _c, *targets)`` evaluates the outputs for a given ``h``.
        Returns ``(source, number of constants)``."""
        hset = set(h_args[1])
        flat = [share_exponentials(sp.sympify(e)) for _, block in outputs for e in block]
        table: dict = {}
        flat = [share_reciprocals(hoist(e, hset, table)) for e in flat]
        consts = list(table.items())
        # Constants: the hoisted expressions (one CSE over them, from z, x, p).
        creps, creduced = cse([share_reciprocals(e) for e, _ in consts], sp.numbered_symbols("_u"))
        # h-dependent part: one CSE over the outputs (in h and the constant symbols).
        reps, reduced = cse(flat, sp.numbered_symbols("_t"))
        used_var = free_symbols(flat)
        const_args_used = [s for _, syms in const_args for s in syms if s in used_var]
        stored = const_args_used + [k for _, k in consts if k in used_var]
        used_c = free_symbols([e for e, _ in consts])
        lc = [f"def {const_name}({', '.join(a for a, _ in const_args)}, _c):", f'    """{doc_const}"""']
        lc += self._loads(const_args, used_c | set(const_args_used))
        lc += [f"    {s.name} = {self._p(e)}" for s, e in creps]
        lc += [f"    {k.name} = {self._p(e)}" for (_, k), e in zip(consts, creduced) if k in used_var]
        lc += [f"    _c[{i}] = {s.name}" for i, s in enumerate(stored)]
        lc.append("    return 0.0")
        targets = [t for t, _ in outputs if t is not None]
        lf = [f"def {name}({h_args[0]}, _c, {', '.join(targets)}):", f'    """{doc}"""']
        lf += [f"    {s.name} = {h_args[0]}[{i}]" for i, s in enumerate(h_args[1]) if s in used_var]
        lf += [f"    {s.name} = _c[{i}]" for i, s in enumerate(stored)]
        lf += [f"    {s.name} = {self._p(e)}" for s, e in reps]
        lf += self._outputs(outputs, reduced)
        return "\n".join(lc) + "\n\n\n" + "\n".join(lf) + "\n", len(stored)


def default_backends() -> list[Backend]:
    """The backends of a committed module: numpy (always) and the per-node leaves."""
    return [NumpyBackend(), NodeBackend()]

