"""Code-generation backends: each turns the model's functions (:class:`Function`) into source text.

The generator (:mod:`replica.codegen.generator`) describes *what* the model computes -- the
bracket and its derivatives, the envelope gradient, the prox starts, the test-point
observables, the entropic update... -- once, as backend-neutral :class:`Function` specs. A
:class:`Backend` decides *how* that reads in code. :class:`KernelBackend` (the default) writes
each function once, in a form that numpy runs on node arrays and numba compiles for one node
(:mod:`replica.interface.generated_model` builds the vectorised functions from it, :mod:`replica.numeric.compiled`
the compiled unit); a new backend (e.g. C, or torch) implements :meth:`Backend.section`.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Sequence

import sympy as sp

from .dag import cse, free_symbols
from .printers import KernelPrinter, hoist, share_exponentials, share_reciprocals


@dataclass(frozen=True)
class NodeForm:
    """The per-node variant of a :class:`Function`: the compiled unit's leaf (:class:`KernelBackend`).

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


class KernelBackend(Backend):
    """Every function once, in *kernel form*: source that numpy runs on node arrays and numba
    compiles for one node.

    A kernel unpacks its arguments along their first axis (``xi_1, eta_1, _ = _z``), writes every
    stacked output block into an array argument it is given (``_out0[k] = ...``) and returns its
    bare-expression block (``0.0`` if it has none). Only ``np.`` functions and the helpers
    ``_exp``, ``_erfc``, ``_ndtr``, ``_bvn``, ``_where`` are called: on arrays they are
    :mod:`replica.interface.generated_model`'s (which also allocates the outputs, so that the vectorised
    functions of the solver are built from the kernels generically), in the compiled unit their
    scalar versions (:mod:`replica.numeric.compiled`). A function with a :class:`NodeForm` is written
    under the node name with the node rewrites (one exponential and one reciprocal per base,
    :func:`~replica.codegen.printers.share_exponentials`) and, with ``split``, as two kernels: the
    ``h``-free constants and the rest (:func:`~replica.codegen.printers.hoist`).
    """

    name = "kernel"

    def __init__(self) -> None:
        self.printer = KernelPrinter({"fully_qualified_modules": True, "inline": True,
                                      "allow_unknown_functions": False})

    def _p(self, e: sp.Expr) -> str:
        return self.printer.doprint(e)

    def section(self, functions: Sequence[Function]) -> str:
        """Every function, in order, after the table that says how to call them (``FUNCTIONS``,
        ``N_CONSTANTS``)."""
        header, sources = self.sources(functions)
        return header + "\n\n" + "\n\n".join(src for src in sources.values() if src)

    def sources(self, functions: Sequence[Function]) -> tuple[str, dict[str, str]]:
        """``(table, sources)``: the table that says how to call the kernels (``FUNCTIONS``,
        ``N_CONSTANTS``) and the source of every function by name, in order (``""`` for one
        written as an entry of another's output), so that the generator can place each function
        in the file of the factor it belongs to."""
        sources: dict[str, str] = {}
        table, n_constants = [], 0
        for fn in functions:
            blocks = tuple(len(b) if stacked else 0 for b, stacked in fn.blocks)
            n_node = len(fn.node_args)
            if fn.delegate is not None:
                table.append(f"    {fn.name!r}: ({fn.delegate[0]!r}, {fn.delegate[1]}),")
                sources[fn.name] = ""
                continue
            if fn.node is None:
                sources[fn.name] = self.function(fn.name, fn.args, self._targets(fn, None), fn.doc)
                table.append(f"    {fn.name!r}: ({fn.name!r}, {n_node}, {blocks!r}, None),")
                continue
            targets = self._targets(fn, fn.node.targets)
            if fn.node.split is not None:
                sources[fn.name], n_constants = self.split_function(fn.node.split[0], fn.node.name, fn.args[0],
                                                                    fn.args[1:], targets, fn.node.split[1],
                                                                    fn.node.doc)
                split = fn.node.split[0]
            else:
                sources[fn.name] = self.function(fn.node.name, fn.args, targets, fn.node.doc, node=True)
                split = None
            table.append(f"    {fn.name!r}: ({fn.node.name!r}, {n_node}, {blocks!r}, {split!r}),")
        header = ("# how replica.interface.generated_model calls the kernels below on node arrays: function -> (kernel,\n"
                  "# leading arguments with node axes, output blocks (entries; 0: one value per node), kernel of\n"
                  "# its h-free constants or None), or (function, entry) for an entry of another's output\n"
                  "FUNCTIONS = {\n" + "\n".join(table) + f"\n}}\nN_CONSTANTS = {n_constants}\n")
        return header, sources

    @staticmethod
    def _targets(fn: Function, names) -> list:
        """``(target, exprs)`` per output block: ``None`` for the returned bare expression, else the
        name of the array argument a stacked block is written into."""
        out = []
        for i, (exprs, stacked) in enumerate(fn.blocks):
            name = names[i] if names is not None else None
            out.append(((name or f"_out{i}") if stacked else None, exprs))
        return out

    @staticmethod
    def _loads(args, used) -> list[str]:
        """One unpacking line per argument whose symbols are used (``_`` for the unused ones). The
        model's parameters ``_p`` are read by position instead (``lam = _p[1]``): a kernel then
        does not depend on how many parameters the model has, and models that share a factor
        share its kernels."""
        lines = []
        for arg, syms in args:
            if arg == "_p":
                lines += [f"    {s.name} = _p[{i}]" for i, s in enumerate(syms) if s in used]
                continue
            if syms and any(s in used for s in syms):
                names = [s.name if s in used else "_" for s in syms]
                lines.append(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = {arg}")
        return lines

    def function(self, name, args, outputs, doc, node: bool = False) -> str:
        """``outputs``: list of ``(target, exprs)`` (see :meth:`_targets`)."""
        flat = [sp.sympify(e) for _, block in outputs for e in block]
        if node:
            flat = [share_reciprocals(share_exponentials(e)) for e in flat]
        reps, reduced = cse(flat, sp.numbered_symbols("_t"))
        used = free_symbols(flat) | free_symbols([e for _, e in reps])
        targets = [t for t, _ in outputs if t is not None]
        lines = [f"def {name}({', '.join([a for a, _ in args] + targets)}):",
                 textwrap.indent(f'"""{doc}"""', "    ")]
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
        """Two kernels: ``const_name(*const_args, _c)`` computes, once per node, every
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
        used_var = free_symbols(flat) | free_symbols([e for _, e in reps])
        const_args_used = [s for _, syms in const_args for s in syms if s in used_var]
        stored = const_args_used + [k for _, k in consts if k in used_var]
        value = {k: e for (_, k), e in zip(consts, creduced)}
        used_c = free_symbols([e for e, _ in consts])
        lc = [f"def {const_name}({', '.join(a for a, _ in const_args)}, _c):", f'    """{doc_const}"""']
        lc += self._loads(const_args, used_c | set(const_args_used))
        lc += [f"    {s.name} = {self._p(e)}" for s, e in creps]
        lc += [f"    _c[{i}] = {self._p(value.get(s, s))}" for i, s in enumerate(stored)]
        lc.append("    return 0.0")
        targets = [t for t, _ in outputs if t is not None]
        lf = [f"def {name}({h_args[0]}, _c, {', '.join(targets)}):", f'    """{doc}"""']
        lf += self._loads([h_args, ("_c", stored)], used_var)
        lf += [f"    {s.name} = {self._p(e)}" for s, e in reps]
        lf += self._outputs(outputs, reduced)
        return "\n".join(lc) + "\n\n\n" + "\n".join(lf) + "\n", len(stored)


def default_backends() -> list[Backend]:
    """The backend of a committed module: the kernels (see :class:`KernelBackend`)."""
    return [KernelBackend()]

