"""LaTeX export of a derivation, in the field's notation: a paper-ready appendix.

:func:`latex_document` writes a standalone ``.tex`` file (plain ``article`` with amsmath, amssymb, bm
and geometry only, so that the same body compiles under revtex4-2 and elsarticle; numbered ``align``
environments, long sums split into rows that fit a two-column page); :func:`markdown_document`
writes the same content as Markdown with ``$$`` blocks. Both print the sympy objects of
:class:`~replica.symbolic.derivation.Derivation` (the stationarity equations the solver runs) and of
:class:`~replica.symbolic.presentation.Presentation` (the prox / ``f_out`` form, closed forms, aggregation),
never text typed per model. A generated Notation section defines every symbol; each symbol has one
meaning (the Gaussian CDF is written ``H(-x)``, the Heaviside step ``1[x > 0]``, the regulariser
``R(w)``, a model parameter whose name the notation takes gets a tilde).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import sympy as sp
from sympy.printing.latex import LatexPrinter

from .channels import BivariateNormalCDF, NormalCDF
from .data import CLUSTER_LETTERS
from .derivation import Derivation
from ..artifacts.freshness import current_stamp
from .observables import TEST_LOSS, StateObservable, TestObservable
from .potentials import GaussianMoreauEnvelope, prox_center_symbols
from .presentation import DW, KAPPA, MU, THRESHOLD_SCALE, W, LabelMean, Mean, Presentation, label_unit
from .regularizers import L2
from .symbols import LATEX_NAMES, PARAMETER_DESCRIPTIONS, symbol

#: width of one printed row, in letter widths of 10 pt math: a two-column page's 8.6 cm column
#: (revtex, elsarticle) at ~0.18 cm per letter is ~48; the equation number and the align's
#: indentation take ~6 of them
ROW_BUDGET = 42.0
#: spellings the notation itself uses: a model parameter spelled so is printed with a tilde
RESERVED = {r"\omega", r"\xi", r"\eta", r"\theta", r"\Phi", r"\Psi", r"\kappa", r"\mu", r"\rho", r"\alpha",
            "q", "V", "m", "f", "r", "s", "H", "W", "Z", "F", "p", "d", "n", "L", "h", "y", "z"}


# ------------------------------------------------------------------------------------------ printing
class ExportPrinter(LatexPrinter):
    """sympy's LaTeX printer with the export's spellings: ``H(-x)`` for the normal CDF ``Phi(x)``,
    ``1[x > 0]`` for Heaviside, ``arccos``, ``E[...]`` for :class:`Mean`; records every symbol it
    prints (the Notation section must define each)."""

    def __init__(self, names: dict, used: set | None = None):
        super().__init__({"symbol_names": names, "inv_trig_style": "full"})
        self.used = used if used is not None else set()

    def _print(self, expr, **kw):
        if isinstance(expr, NormalCDF):
            return rf"H\left({self._print(-expr.args[0])}\right)"
        if isinstance(expr, BivariateNormalCDF):
            a, b, c = expr.args
            return rf"H_2\left({self._print(-a)}, {self._print(-b)}; {self._print(c)}\right)"
        if isinstance(expr, sp.Heaviside):
            return rf"\mathbf{{1}}\left[{self._print(expr.args[0])} > 0\right]"
        if isinstance(expr, Mean):
            return rf"\mathbb{{E}}\left[{self._print(expr.args[0])}\right]"
        if isinstance(expr, LabelMean):
            return rf"\mathbb{{E}}_{{\xi}} \sum_{{y}} \left[{self._print(expr.args[0])}\right]"
        if isinstance(expr, sp.Symbol):
            self.used.add(expr)
        return super()._print(expr, **kw)


def tex(expr, **kw) -> str:
    """LaTeX of a sympy expression with the toolkit's symbol spellings (declaration names)."""
    return sp.latex(expr, symbol_names=dict(LATEX_NAMES), **kw)


def width(latex: str) -> float:
    """Estimated printed width of a LaTeX math string, in letter widths of 10 pt math.

    Letters count their Computer Modern math-italic width (:data:`_GLYPH`), relations, operators and
    punctuation theirs with TeX's spaces, fractions their wider part, sub/superscripts 0.8 of theirs
    (the wider of a stacked pair; operators set tight), ``\\left``/``\\right`` and spacing commands
    their size, a ``cases`` block its widest row; a row longer than :data:`ROW_BUDGET` does not fit a
    column. Against TeX, the export rows over 170 pt come out within 0.95-1.07 of their printed width."""
    def case(mt):
        rows = mt.group(1).split(r"\\")
        return "x" * int(round(max(_width(r) + 1.0 for r in rows) + 1.5))
    return _width(re.sub(r"\\begin\{cases\}(.*?)\\end\{cases\}", case, latex, flags=re.S))


#: widths of 10 pt math glyphs (cmmi10/cmr10 metrics, measured with TeX) in letter widths of 5.1 pt:
#: ``m``, ``w`` and the capitals print half as wide again as ``x``; unlisted characters count 1
_GLYPH = {c: round(w / 5.1, 2) for c, w in {
    "a": 5.29, "b": 4.29, "c": 4.33, "d": 5.20, "e": 4.66, "f": 5.97, "g": 5.13, "h": 5.76, "i": 3.45,
    "j": 4.69, "k": 5.52, "l": 3.18, "m": 8.78, "n": 6.00, "o": 4.85, "p": 5.03, "q": 4.82, "r": 4.79,
    "s": 4.69, "t": 3.61, "u": 5.72, "v": 5.21, "w": 7.43, "x": 5.72, "y": 5.26, "z": 5.09,
    "A": 7.50, "B": 8.09, "C": 7.86, "D": 8.56, "E": 7.96, "F": 7.82, "G": 7.86, "H": 9.12, "I": 5.18,
    "J": 6.51, "K": 9.21, "L": 6.81, "M": 10.79, "N": 9.12, "O": 7.91, "P": 7.81, "Q": 7.91, "R": 7.67,
    "S": 6.71, "T": 7.23, "U": 7.92, "V": 8.06, "W": 10.83, "X": 9.07, "Y": 8.03, "Z": 7.54,
    r"\alpha": 6.43, r"\beta": 6.18, r"\gamma": 5.73, r"\delta": 4.82, r"\epsilon": 4.06,
    r"\varepsilon": 4.66, r"\zeta": 5.11, r"\eta": 5.32, r"\theta": 4.97, r"\iota": 3.54, r"\kappa": 5.76,
    r"\lambda": 5.83, r"\mu": 6.03, r"\nu": 5.58, r"\xi": 4.84, r"\pi": 6.06, r"\rho": 5.17,
    r"\sigma": 6.07, r"\tau": 5.50, r"\phi": 5.96, r"\varphi": 6.54, r"\chi": 6.26, r"\psi": 6.87,
    r"\omega": 6.58, r"\Gamma": 6.25, r"\Delta": 8.33, r"\Theta": 7.78, r"\Lambda": 6.94, r"\Xi": 6.67,
    r"\Pi": 7.50, r"\Sigma": 7.22, r"\Phi": 7.22, r"\Psi": 7.78, r"\Omega": 7.22}.items()}
#: upright function names (``\arccos``, ``\tanh``): roman letters with a thin space after
_FUNCTIONS = {r"\arccos", r"\arcsin", r"\arctan", r"\cos", r"\sin", r"\tan", r"\cosh", r"\sinh",
              r"\tanh", r"\det", r"\ln", r"\sign", r"\erf"}

#: a relation ``=`` with its thick spaces, in letter widths (13.3 pt)
_REL = 2.6

_WIDE = {r"\sum": 1.6, r"\min": 2.4, r"\max": 2.4, r"\log": 2.2, r"\exp": 2.2, r"\quad": 1.96, r"\qquad": 3.92,
         r"\operatorname": 0, r"\mathrm": 0, r"\text": 0, r"\mathbb": 0, r"\left": 0, r"\right": 0, r"\Big": 0,
         r"\,": 0.3, r"\;": 0.4, r"\!": -0.2, r"\cdot": 0.8, r"\nonumber": 0, r"\hat": 0, r"\tilde": 0,
         r"\bar": 0, r"\bm": 0, r"\mathcal": 0, r"\big": 0, r"\bigl": 0, r"\bigr": 0, r"\mid": 1.2,
         r"\in": 1.4, r"\sim": 1.4, r"\le": 1.4, r"\ge": 1.4, r"\to": 1.4}


def _group(s: str, i: int) -> tuple[str, int]:
    """The brace group (or single token) starting at ``s[i]``; returns (content, next index)."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return "", i
    if s[i] == "{":
        depth, j = 0, i
        while j < len(s):
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                depth -= 1
                if depth == 0:
                    return s[i + 1:j], j + 1
            j += 1
        return s[i + 1:], len(s)
    if s[i] == "\\":
        m = re.match(r"\\[A-Za-z]+|\\.", s[i:])
        return m.group(0), i + len(m.group(0))
    return s[i], i + 1


def _width(s: str, script: bool = False) -> float:
    """Width of ``s`` in letter widths; in a sub/superscript (``script``) relations and binary operators
    lose their spaces (TeX sets ``q^{-1/2}`` tight)."""
    w, i = 0.0, 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            m = re.match(r"\\([A-Za-z]+|.)", s[i:])
            cmd = "\\" + m.group(1)
            i += len(m.group(0))
            if cmd in (r"\frac", r"\dfrac", r"\tfrac"):
                a, i = _group(s, i)
                b, i = _group(s, i)
                w += max(_width(a, script), _width(b, script)) + 0.4
            elif cmd == r"\sqrt":
                if i < len(s) and s[i] == "[":
                    k = s.index("]", i)
                    i = k + 1
                a, i = _group(s, i)
                w += _width(a, script) + 1.0
            elif cmd in (r"\operatorname", r"\mathrm", r"\text", r"\texttt"):
                a, i = _group(s, i)
                w += 0.95 * len(a.replace("\\", ""))  # roman letters, ~4.9 pt each
            elif cmd in _WIDE:
                w += _WIDE[cmd]
            elif cmd in _GLYPH:
                w += _GLYPH[cmd]
            elif cmd in _FUNCTIONS:
                w += 0.9 * (len(cmd) - 1) + 0.4
            else:
                w += 1.0
        elif c in "^_":
            a, i = _group(s, i + 1)
            sw = _width(a, True)
            j = i
            while j < len(s) and s[j] == " ":
                j += 1
            if j < len(s) and s[j] in "^_" and s[j] != c:  # q_a^{-1/2}: the two scripts stack
                b, i = _group(s, j + 1)
                sw = max(sw, _width(b, True))
            w += 0.8 * sw
        elif c in "{} ":
            i += 1
        elif c == "&":
            i += 1
        elif c in "=<>+-" and script:
            w += 1.5  # the glyph alone (7.8 pt)
            i += 1
        elif c in "=<>":
            w += _REL
            i += 1
        elif c in "+-":
            w += 2.4  # a binary operator with its medium spaces (12.2 pt)
            i += 1
        elif c in ",;":
            w += 0.87  # punctuation with its thin space (4.4 pt)
            i += 1
        elif c in "()[]":
            w += 0.76  # 3.9 pt
            i += 1
        elif c == "|":
            w += 0.55
            i += 1
        else:
            w += _GLYPH.get(c, 1.0)
            i += 1
    return w


@dataclass
class Eq:
    """One displayed equation: a left-hand side and one or more rows of its right-hand side."""

    lhs: str
    rows: list[str]
    rel: str = "="


@dataclass
class Text:
    """A paragraph."""

    text: str


@dataclass
class Item:
    """A Notation entry: the symbol's spelling and its definition (LaTeX text)."""

    symbol: str
    meaning: str


class Writer:
    """Builds the document of one derivation (sections of paragraphs, equations, notation)."""

    def __init__(self, d: Derivation):
        self.d, self.m = d, d.model
        self.p = Presentation(d)
        _ = (self.p.field_form, self.p.channel_law, d.gradient_placeholders, d.entropic_placeholders)
        self.one = self.m.L == 1 and not self.m.data.has_clusters
        self.names = self._names()
        self.used: set = set()
        self.printer = ExportPrinter(self.names, self.used)
        self.scalar = self.p.scalar_fields
        # one index alphabet per meaning: tokens a, b (j, j' where the cluster labels are the letters
        # a, b, ...), slots s, vector and matrix components as superscripts (_component_names)
        self.ta, self.tb = ("j", "j'") if self.m.data.has_clusters else ("a", "b")
        self.idx = "" if self.one else f"_{self.ta}"
        self.sidx = "_s" if self.m.data.has_clusters else self.idx

    # -------------------------------------------------------------- spellings
    def _names(self) -> dict:
        d, m = self.d, self.m
        names = dict(LATEX_NAMES)
        self.renamed = {}
        for s in m.parameter_symbols:
            t = names.get(s, s.name)
            if t in RESERVED or t.split("_")[0] in (r"\omega", r"\theta", r"\rho", r"\kappa"):
                names[s] = rf"\tilde{{{t}}}"
                self.renamed[s] = names[s]
        if m.L == 1 and not m.data.has_clusters:
            def strip(t):
                return re.sub(r"_\{1\}$", "", t)
            syms = list(d.order_symbols) + list(d.conjugate_symbols) + list(prox_center_symbols(m)) + list(m.h) \
                + list(m.hstar)
            from .potentials import gaussian_symbols
            xi, eta = gaussian_symbols(m)
            syms += list(xi) + list(eta)
            if isinstance(d.entropic_potential, GaussianMoreauEnvelope):
                syms += list(d.entropic_potential.gaussians)
            for s in syms:
                names[s] = strip(names.get(s, LATEX_NAMES.get(s, sp.latex(s))))
            for s in list(d.gradient_placeholders.values()) + list(d.entropic_placeholders.values()):
                names[s] = names[s].replace("_{1}", "")
        names[THRESHOLD_SCALE] = "s"
        went = d.entropic_potential
        reg = m.regularizer
        if isinstance(went, GaussianMoreauEnvelope):
            ws = list(went.variables)
            for i, v in enumerate(ws):
                names[v] = "w" if len(ws) == 1 else f"w_{{{i + 1}}}"
            for i, (u, _) in enumerate(went.intermediates.items()):
                names[u] = "b" if len(went.intermediates) == 1 else f"b_{{{i + 1}}}"
        for i, v in enumerate(getattr(reg, "w", ()) or ()):
            names[v] = "w" if len(reg.w) == 1 else f"w_{{{i + 1}}}"
        names[MU], names[KAPPA] = r"\mu", r"\kappa"
        names[W], names[DW] = r"P(y \mid \xi)", r"\partial_{\mu} Z"
        self._component_names(names)
        return names

    def _component_names(self, names: dict) -> None:
        """Components of the student's (teacher's) vectors and matrices as superscripts, so that a
        subscript is always a token (slot): ``q_{1}^{(12)}`` the (1, 2) entry of token 1's overlap;
        ``q^{QK}`` where the student's columns are queries and keys (fields spelled ``h^Q, h^K``)."""
        d, m = self.d, self.m
        r, rt = m.h.shape[1], m.hstar.shape[1]
        if r == 1 and rt == 1:
            return
        stud = []
        for k in range(r):
            mt = re.match(r"h\^\{?([A-Za-z])\}?_", LATEX_NAMES.get(m.h[0, k], ""))
            stud.append(mt.group(1) if mt else str(k + 1))
        teach = [str(k + 1) for k in range(rt)]

        def sup(labels):
            if not labels:
                return ""
            if all(len(x) == 1 and x.isalpha() for x in labels):
                return "".join(labels)
            return "(" + ("".join(labels) if all(len(x) == 1 for x in labels) else ",".join(labels)) + ")"

        def spell(stem, tok, labels):
            sub = f"_{{{tok}}}" if tok else ""
            if stem == "h^{*}":
                return f"h^{{*{sup(labels)}}}{sub}"
            return f"{stem}{sub}" + (f"^{{{sup(labels)}}}" if labels else "")

        for op in list(d.order_parameters.order_parameters()) + list(d.order_parameters.conjugates()):
            base = op.family[:-3] if op.family.endswith("hat") else op.family
            tok = "" if (op.token is None or self.one) else (op.slot or str(op.token))
            stem = re.sub(r"_\{[^{}]*\}$", "", LATEX_NAMES.get(op.matrix[0, 0], ""))
            M = op.matrix
            seen = set()
            for i in range(M.shape[0]):
                for j in range(M.shape[1]):
                    s = M[i, j]
                    if not isinstance(s, sp.Symbol) or s in seen:
                        continue  # a symmetric matrix's entry is named by its upper triangle
                    seen.add(s)
                    labels = {"q": [stud[i], stud[j]], "V": [stud[i], stud[j]], "m": [stud[i]],
                              "theta": ([stud[i]] if r > 1 else []) + ([teach[j]] if rt > 1 else [])}[base]
                    names[s] = spell(stem, tok, labels)
        from .potentials import gaussian_symbols
        xi, eta = gaussian_symbols(m)
        centres = prox_center_symbols(m)
        for mat, stem, labs in ((m.h, "h", stud), (centres, r"\omega", stud), (xi, r"\xi", stud),
                                (m.hstar, "h^{*}", teach), (eta, r"\eta", teach)):
            for a in range(mat.shape[0]):
                for k in range(mat.shape[1]):
                    tok = "" if self.one else str(a + 1)
                    names[mat[a, k]] = spell(stem, tok, [labs[k]] if mat.shape[1] > 1 else [])
        for x, ph in d.gradient_placeholders.items():
            names[ph] = rf"\partial_{{{names.get(x, LATEX_NAMES.get(x, x.name))}}} \Psi_y"
        for x, ph in d.entropic_placeholders.items():
            names[ph] = rf"\partial_{{{names.get(x, LATEX_NAMES.get(x, x.name))}}} \Psi_w"

    def x(self, expr) -> str:
        """LaTeX of an expression in the export's spellings."""
        for s in getattr(expr, "free_symbols", ()):
            if s not in self.names and s in LATEX_NAMES:
                self.names[s] = LATEX_NAMES[s]
        self.printer._settings["symbol_names"] = self.names  # the printer keeps its own copy
        return self.printer.doprint(expr)

    def rows(self, lhs: str, expr) -> list[str]:
        """The right-hand side as rows that fit :data:`ROW_BUDGET` (a sum split at its terms, a
        product with a long sum, or with a power of one, split inside ``\\Big( \\Big)``)."""
        full = self.x(expr)
        if width(lhs) + _REL + width(full) <= ROW_BUDGET:
            return [full]
        expr = sp.sympify(expr)
        terms = None
        head, tail = "", ""
        if isinstance(expr, sp.Add):
            terms = list(expr.as_ordered_terms())
        elif isinstance(expr, Mean) and isinstance(expr.args[0], sp.Add):
            head, tail = r"\mathbb{E}\Big[", r"\Big]"
            terms = list(expr.args[0].as_ordered_terms())
        elif isinstance(expr, (sp.Mul, sp.Pow)):
            factors = expr.args if isinstance(expr, sp.Mul) else (expr,)
            adds = [f for f in factors if isinstance(f, sp.Add)]
            # else a power of a long sum, e.g. a committee's (sum_k tanh h*_k - tanh h_k)^2 / 2K
            adds = adds or [f for f in factors if isinstance(f, sp.Pow) and isinstance(f.base, sp.Add)
                            and f.exp.is_Integer and f.exp > 1]
            if adds:
                big = max(adds, key=lambda a: len(self.x(a)))
                rest = expr / big
                base, power = (big.base, big.exp) if isinstance(big, sp.Pow) else (big, 1)
                head = self.x(rest) + r" \Big(" if rest != 1 else r"\Big("
                tail = r"\Big)" + (f"^{{{self.x(power)}}}" if power != 1 else "")
                terms = list(base.as_ordered_terms())
        if not terms:
            return [full]
        pieces = []
        for k, t in enumerate(terms):
            s = self.x(t)
            if width(s) > ROW_BUDGET - 6 and isinstance(t, sp.Mul):
                # a long product: its small factors first, each long factor a piece of its own
                big = [f for f in t.args if width(self.x(f)) > 12]
                small = sp.Mul(*[f for f in t.args if f not in big])
                head_s = self.x(small) if small != 1 else ""
                head_s = "-" if head_s == "-1" else head_s
                parts = [head_s] if head_s else []
                parts += [(r"\cdot " if parts and parts[-1] != "-" else "") + self.x(f) for f in big]
                if parts and parts[0] == "-":
                    parts = ["- " + parts[1]] + parts[2:]
                if k and not parts[0].startswith("-"):
                    parts[0] = "+ " + parts[0]
                pieces += parts
                continue
            if k and not s.startswith("-"):
                s = "+ " + s
            pieces.append(s)
        out, cur = [], head
        for s in pieces:
            limit = ROW_BUDGET - (width(lhs) + _REL if not out else 4)
            if cur and width(cur + " " + s) > limit:
                out.append(cur)
                cur = s
            else:
                cur = (cur + " " + s).strip()
        out.append(cur + tail)
        return out

    def pack(self, lhs: str, parts: list[str], sep: str = r", \quad ", rel: str = "") -> Eq:
        """LaTeX parts joined by ``sep`` and packed greedily into rows under :data:`ROW_BUDGET`."""
        rows, cur = [], ""
        for part in parts:
            tup = re.match(r"(.*= )\((.*)\)$", part, re.S)
            if tup and width(part) > ROW_BUDGET - 6:
                # a long tuple: one row per group of its entries, split at the top-level commas
                if cur:
                    rows.append(cur + sep.split("\\")[0].rstrip())
                    cur = ""
                line = tup.group(1) + "("
                entries = _top_level_split(tup.group(2))
                for k, e in enumerate(entries):
                    e = e + ("," if k < len(entries) - 1 else ")")
                    if width(line + " " + e) > ROW_BUDGET - 6 and line.strip() not in ("", tup.group(1) + "("):
                        rows.append(line)
                        line = e
                    else:
                        line = (line + " " + e) if not line.endswith("(") else line + e
                cur = line
                continue
            cand = part if not cur else cur + sep + part
            limit = ROW_BUDGET - (width(lhs) + _REL if not rows else 4)
            if cur and width(cand) > limit:
                rows.append(cur + sep.split("\\")[0].rstrip())
                cur = part
            else:
                cur = cand
        rows.append(cur)
        return Eq(lhs, rows, rel)

    def eq(self, lhs, rhs, rel: str = "=") -> Eq:
        """An equation from sympy objects or LaTeX strings."""
        l = lhs if isinstance(lhs, str) else self.x(lhs)
        if isinstance(rhs, str):
            return Eq(l, [rhs], rel)
        return Eq(l, self.rows(l, rhs), rel)

    # -------------------------------------------------------------- sections
    def sections(self) -> list[tuple[str, list]]:
        """The document as (title, items) pairs."""
        out = [("Model", self.model())]
        pots = self.potentials()
        sad = self.saddle()
        obs = self.observables()
        red = self.reductions()
        self.printed = " ".join(" ".join([it.lhs, *it.rows]) if isinstance(it, Eq) else _math_of(it.text)
                                for it in out[0][1] + pots + sad + obs + red)
        # the notation is generated last (it lists what the other sections print) but shown second
        out.append(("Notation", self.notation()))
        out += [("Potentials", pots), ("Saddle-point equations", sad), ("Observables", obs)]
        if red:
            out.append(("Dictionary to the published forms", red))
        return out

    def model(self) -> list:
        m = self.m
        p = m.h.shape[1]
        items = []
        tokens = "one token" if m.L == 1 else f"$L = {m.L}$ tokens"
        pos = any(any(sp.sympify(x) != 0 for x in a.pi) for a in m.data.atoms)
        items.append(Text(
            rf"Data: $n = \alpha d$ samples, each of {tokens} $x{self.idx} \in \mathbb{{R}}^d$"
            + (rf" with positional encodings $p{self.idx}$" if pos else "")
            + rf". Student weights $W \in \mathbb{{R}}^{{d \times {p}}}$, teacher weights "
            rf"$W^* \in \mathbb{{R}}^{{d \times {m.r_t}}}$; the loss sees the fields "
            + (rf"$h{self.idx} = W^\top(x{self.idx} + p{self.idx})/\sqrt{{d}}$" if pos else rf"$h{self.idx} = W^\top x{self.idx}/\sqrt{{d}}$")
            + rf" and $h^*{self.idx} = W^{{*\top}} x{self.idx}/\sqrt{{d}}$."))
        if m.student is not None:
            items += self._attention_blocks()
        else:
            items += self._glm_blocks()
        wv = sp.Matrix([symbol(f"wrow_{i + 1}", "w" if p == 1 else f"w_{{{i + 1}}}") for i in range(p)])
        reg = m.regularizer
        rexpr = reg.expression(wv)
        self.names.update({s: ("w" if p == 1 else f"w_{{{i + 1}}}") for i, s in enumerate(wv)})
        if isinstance(reg, L2) and p > 1:
            Lam = reg.matrix(p)
            diag = ", ".join(self.x(Lam[i, i]) for i in range(p))
            items.append(Text(r"Regulariser of a weight row $w \in \mathbb{R}^{" + str(p) + r"}$ (penalty "
                              r"$\sum_{i=1}^d \mathcal{R}(W_i)$):"))
            items.append(self.eq(r"\mathcal{R}(w)", r"\tfrac{1}{2} w^\top \Lambda w, \quad \Lambda = \operatorname{diag}("
                                 + diag + ")"))
        else:
            items.append(Text(r"Regulariser of a weight row $w \in \mathbb{R}^{" + str(p) + r"}$ (penalty "
                              r"$\sum_{i=1}^d \mathcal{R}(W_i)$):"))
            items.append(self.eq(r"\mathcal{R}(w)", rexpr))
        items += self._data_blocks()
        if m.reduction is not None and m.reduction.coefficients:
            parts = []
            for fam, c in m.reduction.coefficients.items():
                stem = {"q": "q", "V": "V", "m": "m", "theta": r"\theta"}[fam]
                parts.append(", ".join(rf"{stem}_{{{l + 1}}} = {dict([(1, ''), (-1, '-')]).get(ci, str(ci))}{stem}"
                                       for l, ci in enumerate(c)))
            items.append(Text("Token symmetry: the free order parameters carry no token index,"))
            items.append(self.pack("", [x for part in parts for x in part.split(", ")]))
        return items

    def _glm_blocks(self) -> list:
        m = self.m
        items = []
        loss = m.loss
        self.label_y = None
        if m.channel is not None:
            items.append(Text("Teacher channel (the label's law given the teacher field enters the Gaussian "
                              "measure):"))
            items.append(self.pack("", m.channel.describe(self.x).split(r", \quad "), r", \quad "))
        elif m.noise:
            z = m.noise[0]
            hs = m.hstar[0, 0]
            smooth = loss.args[0].expr if isinstance(loss, sp.Piecewise) else loss  # one branch gives the ratio
            dz, dh = sp.diff(smooth, z), sp.diff(smooth, hs)
            k = sp.simplify(dz / dh) if dh != 0 else None
            if k is not None and not (k.free_symbols & (set(m.h) | {hs, z})):
                y = symbol("y_label", "y")
                ly = sp.simplify(loss.subs(hs, y - k * z))
                if z not in ly.free_symbols and hs not in ly.free_symbols:
                    self.label_y = (y, hs + k * z)
                    self.names[y] = "y"
                    items.append(Text("Label (noise $z \\sim \\mathcal{N}(0, 1)$):"))
                    items.append(self.eq(y, hs + k * z))
                    loss = ly
        items.append(Text(r"Per-sample loss $\ell$ (a function of the fields; the risk is "
                          r"$\sum_{k=1}^n \ell(h^k, y^k) + \sum_{i=1}^d \mathcal{R}(W_i)$, $k$ the sample):"))
        args = "h, y" if (m.channel is not None or self.label_y) else r"h, h^{*}"
        lse = self._log_sum_exp(loss)
        if lse is not None:
            us, y = lse
            names = ", ".join(f"u_{{{k}}}" for k in m.channel.values)
            items.append(Eq(rf"\ell({args})", [r"\log \sum_{k} e^{u_k} - u_{y}"]))
            items.append(Text("with the student's logits"))
            items.append(self.pack(f"({names})", [self.x(u) for u in us], ", ", "="))
            items[-1].rows = ["(" + items[-1].rows[0]] + items[-1].rows[1:]
            items[-1].rows[-1] += ")"
        else:
            items.append(self.eq(rf"\ell({args})", loss))
        return items

    def _log_sum_exp(self, loss):
        """``(logits, label)`` if the loss is the cross-entropy ``log sum_k exp(u_k) - u_y`` of a channel's
        labels ``0..K-1`` (checked at every label value), else ``None``."""
        m = self.m
        if m.channel is None:
            return None
        logs = [t for t in sp.Add.make_args(loss) if isinstance(t, sp.log)]
        if len(logs) != 1:
            return None
        us = [e.args[0] if isinstance(e, sp.exp) else None for e in sp.Add.make_args(logs[0].args[0])]
        y = m.channel.label
        vals = list(m.channel.values)
        if None in us or len(us) != len(vals) or vals != list(range(len(vals))):
            return None
        us = sorted(us, key=lambda u: [k for k in vals
                                       if sp.simplify((loss - logs[0]).subs(y, k) + u) == 0] or [len(vals)])
        if any(sp.simplify((loss - logs[0]).subs(y, k) + us[k]) != 0 for k in vals):
            return None
        return us, y

    def _attention_blocks(self) -> list:
        m = self.m
        items = []
        S, T = m.student, m.target
        h, hs = m.h, m.hstar
        from .symbols import softmax_rows
        score = None
        rr = h.shape[1]
        cands = [(h * h.T, r"h h^\top")]
        if rr % 2 == 0:
            cands.append((h[:, :rr // 2] * h[:, rr // 2:].T, r"h^{Q} h^{K\top}"))
        for M, name in cands:
            if S == softmax_rows(M):
                score = rf"\operatorname{{softmax}}\left({name}\right)"
            elif S == M:
                score = name
        if score is None:
            score = self.x(S[0, 0]) + r"\ \text{(entry 11; all entries alike)}"
        items.append(Text(r"Student attention (" + ("softmax row by row, " if "softmax" in score else "")
                          + r"$h \in \mathbb{R}^{L \times " + str(rr) + "}$ "
                          + (rf"stacks $h{self.idx} = (h^{{Q}}{self.idx}, h^{{K}}{self.idx})$" if "Q" in score
                             else f"the rows $h{self.idx}$") + "):"))
        items.append(Eq("S(h)", [score]))
        sm = softmax_rows(hs * hs.T)
        dummies = sp.Matrix(sm.shape[0], sm.shape[1], lambda i, j: sp.Dummy(f"u{i}{j}"))
        Tx = T.xreplace({sm[i, j]: dummies[i, j] for i in range(sm.shape[0]) for j in range(sm.shape[1])})
        target = None
        coef = sp.simplify(sp.diff(Tx[0, 0], dummies[0, 0]))
        rest = sp.simplify(Tx - coef * dummies)
        if coef != 0 and not (rest.free_symbols & (set(hs) | set(dummies))):
            extra = ""
            for P in m.parameters:
                if isinstance(P, sp.MatrixBase) and P.shape == rest.shape:
                    k = sp.simplify(rest[0, 0] / P[0, 0])
                    if sp.simplify(rest - k * P) == sp.zeros(*P.shape):
                        stem = LATEX_NAMES.get(P[0, 0], "A").split("_")[0]
                        extra = " + " + self.x(k) + " " + stem
                        self._matrix_param = (stem, P)
            if extra or rest == sp.zeros(*rest.shape):
                c = self.x(coef)
                target = (f"({c})" if isinstance(coef, sp.Add) else c) + r" \operatorname{softmax}\left(h^{*} h^{*\top}\right)" + extra
        if target is None and T == hs * hs.T:
            target = r"h^{*} h^{*\top}"
        if target is None:
            target = self.x(T[0, 0]) + r"\ \text{(entry 11)}"
        items.append(Text("Target attention:"))
        items.append(Eq("T(h^{*})", [target.replace(r"1 \operatorname", r"\operatorname")]))
        rb = [sp.simplify(m.data.token_rho_bar(l)) for l in range(m.L)]
        pos = any(any(sp.sympify(x) != 0 for x in at.pi) for at in m.data.atoms)
        ta, tb = self.ta, self.tb
        out_ = r"S(h)\, (x + P)" if pos else r"S(h)\, x"
        items.append(Text(r"Per-sample loss: the square error $\|y - " + out_ + r"\|_F^2 / (2d)$ between the target "
                          r"$y = T(h^{*})\, x$ and the student's output $" + out_ + r"$ ($x" + (", P" if pos else "")
                          + r" \in \mathbb{R}^{L \times d}$ the tokens" + (" and their encodings" if pos else "")
                          + r" as rows), in the limit $d \to \infty$, with the token powers $\bar\rho_"
                          + tb + r"$:"))
        if len(set(rb)) == 1 and not m.data.has_clusters:
            items.append(Eq(r"\ell(h, h^{*})", [r"\frac{" + self.x(rb[0]) + r"}{2} \left\| T(h^{*}) - S(h) "
                                                r"\right\|_F^2"]))
        else:
            items.append(Eq(r"\ell(h, h^{*})", [rf"\frac{{1}}{{2}} \sum_{{{ta}, {tb}}} \bar\rho_{{{tb}}} "
                                                rf"\left(T(h^{{*}}) - S(h)\right)_{{{ta}{tb}}}^2"]))
        return items

    def _data_blocks(self) -> list:
        m = self.m
        data = m.data
        if data.has_clusters:
            return [self.pack("", it.rows, r" \quad ") if isinstance(it, Eq) else it
                    for it in _cluster_blocks(m, self.x)]
        items = []
        ta = self.ta
        if self.one:
            items.append(Text(r"Data statistics: $x \sim \mathcal{N}(0, \Sigma)$ with"))
            items.append(Eq("", [rf"\bar\rho = {self.x(data.rho_bar(0))}, \quad "
                                 rf"\rho = {self.x(data.rho(0, m.r_t)[0, 0] if m.r_t == 1 else data.rho(0, m.r_t))}"], ""))
        else:
            items.append(Text(rf"Token statistics ($x_{ta} \sim \mathcal{{N}}(0, \Sigma_{ta})$, independent):"))
            items.append(self.pack("", [rf"\bar\rho_{{{l + 1}}} = {self.x(data.rho_bar(l))}" for l in range(m.L)]
                                   + [rf"\rho_{{{l + 1}}} = {self.x(data.rho(l, 1)[0, 0])}" for l in range(m.L)]))
        if self.one and self.scalar:
            return items
        pos = any(any(sp.sympify(x) != 0 for x in at.pi) for at in data.atoms)
        sub = "" if self.one else f"_{ta}"
        atoms = []
        for at in data.atoms:
            gam = ", ".join(self.x(g) for g in at.gamma)
            row = (rf"\text{{weight }} {self.x(at.weight)}: \ " + (rf"(\gamma{sub}) = ({gam})" if sub else
                                                                     rf"\gamma = {gam}"))
            if pos:
                row += rf", \ (\pi{sub}) = ({', '.join(self.x(x) for x in at.pi)})"
            atoms.append(row)
        rt = "" if m.r_t == 1 else rf"_{{{m.r_t}}}"
        eye = "1" if m.r_t == 1 else "I" + rt
        items.append(Text(rf"Spectral law $\nu$ of the eigenvalues $\gamma{sub}$ of $\Sigma{sub}$"
                          + (rf", the projections $\pi{sub}$ of $p{sub}$ on their eigenvectors" if pos else "")
                          + r" and the teacher's components $\tau$ on them; $\tau \sim \mathcal{N}(0, " + eye
                          + r")$ is independent of the rest (an i.i.d. Gaussian teacher), so $\mathbb{E}\,\tau = 0$, "
                          + (r"$\mathbb{E}\,\tau^2 = 1$" if m.r_t == 1 else r"$\mathbb{E}\,\tau\tau^\top = " + eye + "$")
                          + (rf", $\mathbb{{E}}\,\pi{sub} \tau = 0$" if pos else "") + ":"))
        for row in atoms:
            items.append(self.pack("", row.split(r", \ "), r", \ "))
        return items

    # -------------------------------------------------------------- potentials
    def potentials(self) -> list:
        d, m = self.d, self.m
        items = []
        a = self.sidx
        tr = r"\operatorname{tr}"
        fams = m.families
        if self.scalar:
            terms = [rf"\frac{{1}}{{2}} \hat V{a} q{a}", rf"- \frac{{1}}{{2}} \hat q{a} V{a}"]
            terms += [rf"- \hat m{a} m{a}"] if "m" in fams else []
            terms += [rf"- \hat\theta{a} \theta{a}"] if "theta" in fams else []
        else:
            terms = [rf"\tfrac{{1}}{{2}} {tr}(\hat V{a} q{a})", rf"- \tfrac{{1}}{{2}} {tr}(\hat q{a} V{a})"]
            terms += [rf"- \hat m{a}^\top m{a}"] if "m" in fams else []
            terms += [rf"- {tr}(\hat\theta{a}^\top \theta{a})"] if "theta" in fams else []
        gen = " ".join(terms)
        items.append(Text("Trace potential (bilinear in the order parameters and their conjugates),"))
        if self.one:
            items.append(Eq(r"\Psi_t", [gen]))
        else:
            head = rf"\sum_{{{a[1:]}}} \Big("
            if width(r"\Psi_t" + head + gen) + 6 <= ROW_BUDGET:
                items.append(Eq(r"\Psi_t", [head + gen + r"\Big)"]))
            else:
                items.append(Eq(r"\Psi_t", [head + " ".join(terms[:2]), " ".join(terms[2:]) + r"\Big)"]))
            items.append(Text("in the free order parameters:"))
            items.append(self.eq(r"\Psi_t", d.trace_potential))
        went = d.entropic_potential
        if isinstance(went, GaussianMoreauEnvelope):
            items.append(Text("Entropic potential, a Moreau envelope of the regulariser "
                              r"($\hat w$ its minimiser, the proximal map of $\mathcal{R}$):"))
            gw = ", ".join(self.x(g) for g in went.gaussians)
            head = rf"-\mathbb{{E}}_{{{gw}}} \min_w "
            rows = self.rows(r"\Psi_w " + head + r"\Big[\Big]", went.bracket)
            if len(rows) == 1:
                rows = [head + rf"\left[{rows[0]}\right]"]
            else:
                rows = [head + r"\Big[" + rows[0], *rows[1:-1], rows[-1] + r"\Big]"]
            items.append(Eq(r"\Psi_w", rows))
            for u, e in went.intermediates.items():
                items.append(self.eq(u, e))
            if getattr(went, "argmin", None):
                for v, e in zip(went.variables, went.argmin):
                    items.append(self.eq(rf"\hat{{{self.x(v)}}}", e))
        elif self.scalar:
            items.append(Text("Entropic potential ($\\ell_2$ penalty: the Gaussian average "
                              + ("and the average over $\\nu$ " if not self.one else "")
                              + "done exactly):"))
            items.append(self.eq(r"\Psi_w", went))
        else:
            sa = a or ""
            s_ = a[1:] if a else ""
            b = [rf"\pi{sa} \hat m{sa}"] if "m" in fams else []
            b += [rf"\gamma{sa} \hat\theta{sa} \tau"] if "theta" in fams else []
            sm = rf"\sum_{{{s_}}} " if s_ else ""
            items.append(Text(r"Entropic potential (quadratic penalty, $\mathbb{E}_\nu$ over the spectral law):"))
            items.append(Eq(r"\Psi_w", [r"\tfrac{1}{2} \mathbb{E}_\nu \operatorname{tr}\left[(\Lambda + \mathbb{A})^{-1}"
                                        + (r"(\mathbb{B} + b b^\top)\right]" if b else r"\mathbb{B}\right]")]))
            parts = [rf"\mathbb{{A}} = {sm}\gamma{sa} \hat V{sa}", rf"\mathbb{{B}} = {sm}\gamma{sa} \hat q{sa}"]
            if b:
                bb = " + ".join(b)
                parts.append(rf"b = {sm}" + (f"({bb})" if sm and len(b) > 1 else bb))
            items.append(self.pack("", parts))
        items += self._energetic_potential()
        items.append(Text(r"Free entropy, extremised over all order parameters and conjugates:"))
        items.append(Eq(r"\Phi", [r"\operatorname{extr} \left[ \Psi_t + \Psi_w + \alpha \Psi_y \right]"]))
        return items

    def _energetic_potential(self) -> list:
        m = self.m
        env = self.d.energetic_potential
        a = self.idx
        has_m = "m" in m.families
        items = []
        if self.scalar:
            quad = rf"\frac{{(h{a} - \omega{a})^2}}{{2 V{a}}}"
        else:
            quad = rf"\tfrac{{1}}{{2}} (h{a} - \omega{a})^\top V{a}^{{-1}} (h{a} - \omega{a})"
        if not self.one:
            quad = rf"\sum_{{{self.ta}}} " + quad
        if m.channel is not None:
            items.append(Text(r"Energetic potential, a Moreau envelope of the loss at the label $y$, averaged with "
                              r"the label's law $P$ given the student's Gaussian $\xi$ (the $Z_{\rm out}$ form):"))
            items.append(Eq(r"\Psi_y", [r"-\mathbb{E}_{\xi} \sum_{y} P(y \mid \xi) \min_{h} F(h; \omega, y)"]))
            items.append(self.pack(r"F(h; \omega, y)", [quad, r"+ \ell(h, y)"], sep=" ", rel="="))
            items += self._label_law()
        else:
            args = "h, y" if getattr(self, "label_y", None) else r"h, h^{*}"
            second = "y" if getattr(self, "label_y", None) else r"h^{*}"
            items.append(Text("Energetic potential, a Moreau envelope of the loss:"))
            items.append(Eq(r"\Psi_y", [rf"-\mathbb{{E}} \min_{{h}} F(h; \omega, {second})"]))
            items.append(self.pack(rf"F(h; \omega, {second})", [quad, rf"+ \ell({args})"], sep=" ", rel="="))
        centre = (rf"m{a} + " if has_m else "")
        if self.scalar:
            items.append(Text(r"with the prox centre $\omega" + a + r"$ and the teacher field"
                              + (" (integrated out into $P$)" if m.channel is not None else "")
                              + r" jointly Gaussian ($\xi" + a + r", \eta" + a
                              + r"$ standard, independent):"))
            items.append(Eq(rf"\omega{a}", [centre + rf"\sqrt{{q{a}}}\, \xi{a}"]))
            items.append(Eq(rf"h^{{*}}{a}", [rf"\frac{{\theta{a}}}{{\sqrt{{q{a}}}}}\, \xi{a} + \sqrt{{\kappa{a}}}\, \eta{a}, "
                                            rf"\quad \kappa{a} = \rho{a} - \frac{{\theta{a}^2}}{{q{a}}}"]))
        else:
            items.append(Text(r"with the prox centres and teacher fields jointly Gaussian ($\xi" + a + r", \eta" + a
                              + r"$ standard, independent):"))
            items.append(Eq(rf"\omega{a}", [centre + rf"q{a}^{{1/2}} \xi{a}"]))
            items.append(Eq(rf"h^{{*}}{a}", [rf"\theta{a}^\top q{a}^{{-1/2}} \xi{a} + \kappa{a}^{{1/2}} \eta{a}, \quad "
                                           rf"\kappa{a} = \rho{a} - \theta{a}^\top q{a}^{{-1}} \theta{a}"]))
        if self.d.order_parameters.units is not None:
            items.append(Text(self.d.order_parameters.units.describe()))
        if env.pieces is not None:
            shown = self.p.closed.prox is not None
            items.append(Text("The loss is piecewise smooth in $h$; its prox is found exactly, piece by piece"
                              + (" (in closed form below)." if shown else
                                 ": the global minimum over the stationary points of every piece inside its "
                                 "interval and the breakpoints.")))
        return items

    def _label_law(self) -> list:
        """``P(y | xi)``: printed where it fits three rows, else per label value, else defined in words."""
        m = self.m
        y = m.channel.label
        w = self.d.energetic_potential.weight
        w = label_unit(w, y) if tuple(m.channel.values) == (-1, 1) else w
        if width(self.x(w)) <= 3 * ROW_BUDGET:
            return [self.eq(r"P(y \mid \xi)", w)]
        per = [sp.simplify(w.subs(y, v)) for v in m.channel.values]
        if all(width(self.x(e)) <= 3 * ROW_BUDGET for e in per):
            out = [Text(r"with the label's law given $\xi$ (the probability over $\eta$ in $h^{*}$ below of the "
                        r"channel's event; $H_2(a, b; c) = \mathbb{P}(X > a, Y > b)$, $X, Y$ standard Gaussians "
                        r"of correlation $c$):" if any(e.has(BivariateNormalCDF) for e in per) else
                        r"with the label's law given $\xi$ (over $\eta$ in $h^{*}$ below):")]
            out += [self.eq(rf"P(y = {self.x(v)} \mid \xi)", e) for v, e in zip(m.channel.values, per)]
            return out
        from .channels import Argmax
        if isinstance(m.channel, Argmax):
            return [Text(r"with the label's law given $\xi$, over $\eta$ in $h^{*}$ below: the probability that "
                         r"the Gaussian differences $u^{*}_y - u^{*}_k$, $k \neq y$, are all positive (with three "
                         r"classes a bivariate orthant probability $H_2$ of their means and covariance given $\xi$),"),
                    Eq(r"P(y \mid \xi)", [r"\mathbb{P}_{\eta}\left(\operatorname{argmax}_k u^{*}_k = y\right)"])]
        return [Text(r"with $P(y \mid \xi)$ the probability of the label $y$ given $\xi$, over $\eta$ in $h^{*}$ "
                     r"below.")]

    # -------------------------------------------------------------- saddle point
    def saddle(self) -> list:
        d, p = self.d, self.p
        items = [Text(r"Stationarity of $\Phi$ in the order parameters $X$ and their conjugates $\hat X$ "
                      r"(the factors come from the coupling $K = \partial^2 \Psi_t / \partial X \partial \hat X$):")]
        for eq in d.saddle_point.energetic:
            items.append(self.eq(eq.lhs, eq.rhs))
        items.append(Text(r"\textit{Entropic side.}"))
        closed = p.closed
        if closed.entropic_kind == "l1":
            den = self.x(closed.curvature)
            den = f"({den})" if isinstance(closed.curvature, sp.Add) else den
            items.append(Text(r"$\ell_1$ penalty: the prox is soft thresholding, "
                              rf"$\hat w = \operatorname{{sign}}(b)(|b| - {self.x(closed.threshold)})_+ / {den}$ of "
                              r"the centred Gaussian field $b$ of variance $s^2$; its averages in erfc form:"))
            items.append(self.eq("s^2", sp.Add(*[c ** 2 for c in
                                                sp.Poly(next(iter(d.entropic_potential.intermediates.values())),
                                                        *d.entropic_potential.gaussians).coeffs()])))
            for eq in closed.entropic:
                items.append(self.eq(eq.lhs, eq.rhs))
        elif closed.entropic_kind == "l2" and self.scalar:
            for eq in closed.entropic:
                items.append(self.eq(eq.lhs, eq.rhs))
        elif closed.entropic_kind == "l2":
            items.append(Text(r"Quadratic penalty, in matrix form ($\mathbb{E}_\nu$ over the spectral law; "
                              r"$G = (\Lambda + \mathbb{A})^{-1}$):"))
            a, fams = self.sidx, self.m.families
            bb = r"(\mathbb{B} + b b^\top)" if ("m" in fams or "theta" in fams) else r"\mathbb{B}"
            rows = [(rf"V{a}", rf"\mathbb{{E}}_\nu\left[\gamma{a} G\right]"),
                    (rf"q{a}", rf"\mathbb{{E}}_\nu\left[\gamma{a} G {bb} G\right]")]
            rows += [(rf"m{a}", rf"\mathbb{{E}}_\nu\left[\pi{a} G b\right]")] if "m" in fams else []
            rows += [(rf"\theta{a}", rf"\mathbb{{E}}_\nu\left[\gamma{a} G b \tau^\top\right]")] if "theta" in fams else []
            for lhs, rhs in rows:
                items.append(Eq(lhs, [rhs]))
        else:
            items.append(Text(r"By the envelope theorem ($\hat w$ the minimiser of the entropic bracket $B$), "
                              r"$\partial_{\hat x} \Psi_w = -\mathbb{E}[\partial_{\hat x} B]_{w = \hat w}$:"))
            for eq in d.saddle_point.entropic:
                items.append(self.eq(eq.lhs, eq.rhs))
            for s_, e in zip(d.conjugate_symbols, d.saddle_point.entropic_gradient.values()):
                items.append(self.eq(rf"\partial_{{{self.x(s_)}}} B", e))
        items.append(Text(r"\textit{Energetic side}, in prox form: "
                          r"$\hat h" + self.idx + r"$ the global minimiser of $F$, "
                          r"$f" + self.idx + r"$ the scaled residual,"))
        items += self._energetic()
        items.append(Text("Prox convention: $\\hat h$ is the global minimiser of $F$ (the theory of the global "
                          "minimiser of the empirical risk, the default). Under the local convention the same "
                          "equations are evaluated at the minimum reached by descent from $h = 0$ along the "
                          "modified-Newton flow $\\dot h = -|\\nabla_h^2 F|^{-1} \\nabla_h F$."))
        return items

    def _energetic(self) -> list:
        p, m = self.p, self.m
        ff = p.field_form
        a = self.idx
        items = []
        if ff is None:
            items.append(Eq(rf"f{a}", [rf"V{a}^{{-1}} (\hat h{a} - \omega{a})"]))
            items.append(Text("and" + ("" if self.one else ", token by token") + " (matrix notation; "
                              "$\\mathbb{E}$ over the Gaussians"
                              + (" and the labels" if m.channel is not None or m.data.has_clusters else "") + "):"))
            fams = m.families
            dev = rf"(\omega{a} - m{a})" if "m" in fams else rf"\omega{a}"
            rows = [(rf"\hat q{a}", rf"\alpha\, \mathbb{{E}}\left[f{a} f{a}^\top\right]")]
            rows += [(rf"\hat m{a}", rf"\alpha\, \mathbb{{E}}\left[f{a}\right]")] if "m" in fams else []
            if "theta" in fams:
                rows += [(rf"\hat\theta{a}", rf"\alpha\, \mathbb{{E}}\left[f{a} (h^{{*}}{a} - \theta{a}^\top q{a}^{{-1}} "
                                              rf"{dev})^\top\right] \kappa{a}^{{-1}}"),
                         (rf"\hat V{a}", rf"-\alpha\, \mathbb{{E}}\left[f{a} {dev}^\top\right] q{a}^{{-1}}"
                                         rf" + \hat\theta{a} \theta{a}^\top q{a}^{{-1}}")]
            else:
                rows += [(rf"\hat V{a}", rf"-\alpha\, \mathbb{{E}}\left[f{a} {dev}^\top\right] q{a}^{{-1}}")]
            for lhs, rhs in rows:
                items.append(Eq(lhs, [rhs]))
            items.append(Text(rf"($\hat V{a}$ symmetrised; for a symmetric matrix written by its independent entries "
                              r"the off-diagonal factors follow from $K$ above)."))
            if m.reduction is not None and m.reduction.coefficients:
                items.append(Text("The reduced conjugates aggregate the " + ("slots':" if m.data.has_clusters
                                                                             else "tokens':")))
                stems = {"q": r"\hat q", "V": r"\hat V", "m": r"\hat m", "theta": r"\hat\theta"}
                labels = m.data.slot_labels
                parts = []
                for fam, c in m.reduction.coefficients.items():
                    terms = "".join(("" if k == 0 and ci == 1 else ("+ " if ci == 1 else "- " if ci == -1 else
                                                                     f"+ {ci} ")) + f"{stems[fam]}_{{{labels[k]}}} "
                                    for k, ci in enumerate(c))
                    parts.append(f"{stems[fam]} = {terms.strip()}")
                items.append(self.pack("", parts))
            return items
        t0 = ff.tokens[0]
        items.append(Eq(rf"f{a}", [rf"\frac{{\hat h{a} - \omega{a}}}{{V{a}}}"]))
        closed = p.closed
        if closed.prox is not None and closed.f is not None:
            n = len(closed.prox.args) if isinstance(closed.prox, sp.Piecewise) else 1
            items.append(Text("The prox in closed form" + (f" ({n} pieces)" if n > 1 else "") + ":"))
            items.append(self.eq(t0.hhat, self._y(closed.prox)))
            items.append(self.eq(t0.f, self._y(closed.f)))
        elif closed.stationarity is not None:
            items.append(Text(r"The loss is smooth: at the minimiser $f = -\partial_h \ell(\hat h)$,"))
            items.append(self.eq(t0.f, closed.stationarity))
        if ff.channel:
            Z, dZ, mu, kappa = p.channel_law
            y = m.channel.label
            items.append(Text(r"The label's law given the teacher form $u \sim \mathcal{N}(\mu, \kappa)$ and its "
                              r"derivative, at the teacher's mean and variance given $\xi$:"))
            items.append(self.eq(r"Z(y \mid \mu, \kappa)", label_unit(Z, y)))
            items.append(self.eq(r"\partial_{\mu} Z", label_unit(sp.simplify(dZ), y)))
            if sp.simplify(kappa - (t0.rho - t0.theta ** 2 / t0.q)) == 0:
                items.append(Eq(r"\mu", [self.x(mu)]))  # kappa is the one defined with h* above
            else:
                items.append(Eq(r"\mu", [self.x(mu) + r", \quad \kappa = " + self.x(kappa)]))
            items.append(Text(r"and $P(y \mid \xi) = Z(y \mid \mu, \kappa)$ above. Then"))
        else:
            items.append(Text(r"Then ($\mathbb{E}$ over $\xi" + a + r", \eta" + a + r"$"
                              + (" and the noise" if m.noise else "") + "):"))
        for eq in ff.equations:
            items.append(self.eq(eq.lhs, eq.rhs))
        if ff.stein is not None:
            items.append(Text(r"The loss is convex, so $f$ is Lipschitz in $\omega$ and Gaussian integration by "
                              r"parts gives the equivalent"))
            for eq in ff.stein:
                items.append(self.eq(eq.lhs, eq.rhs))
            if closed.dfdomega is not None:
                items.append(self.eq(t0.dfdomega, self._y(closed.dfdomega)))
        else:
            items.append(Text(r"(The first-order form of $\hat V$ holds where the prox jumps between minima, as "
                              r"it does for this non-convex loss; $-\alpha \mathbb{E}[\partial_\omega f]$ would miss "
                              r"the jumps.)"))
        if ff.aggregation:
            items.append(Text("The reduced conjugates aggregate the tokens':"))
            for eq in ff.aggregation:
                items.append(self.eq(eq.lhs, eq.rhs))
        if closed.energetic:
            items.append(Text(r"The loss is quadratic in $h$: the Moreau envelope and its Gaussian average are "
                              r"done exactly,"))
            items.append(self.eq(r"\Psi_y", closed.psi_y))
            for eq in closed.energetic:
                items.append(self.eq(eq.lhs, eq.rhs))
        return items

    def _y(self, e):
        """Label-simplified (``y^2 = 1``) where the label is ``+-1``, the noisy label folded back in."""
        m = self.m
        if m.channel is not None and tuple(m.channel.values) == (-1, 1):
            return e
        if getattr(self, "label_y", None):
            y, expr = self.label_y
            k = sp.Dummy()
            return sp.simplify(sp.sympify(e).subs(m.hstar[0, 0], k - (expr - m.hstar[0, 0])).subs(k, y))
        return e

    # -------------------------------------------------------------- observables
    def observables(self) -> list:
        m = self.m
        out = []
        for o in m.observables:
            if isinstance(o, TestObservable):
                if o.name == TEST_LOSS and sp.sympify(o.expr) == m.loss:
                    out.append(Text(r"Test error, the loss at a fresh sample (per sample, no prox: "
                                    r"$h = \omega$ has the law of the test fields):"))
                    args = "\\omega, y" if (m.channel is not None or getattr(self, "label_y", None)) else r"\omega, h^{*}"
                    out.append(Eq(r"\varepsilon_g", [rf"\mathbb{{E}}\, \ell({args})"]))
                    continue
                if self._is_argmax_error(o.expr):
                    out.append(Text(f"{self._describe(o)}: the probability that the student's largest logit "
                                    r"$u_k$ (at a fresh sample, $h = \omega$) is not the label's,"))
                    out.append(Eq(o.tex_name, [r"\mathbb{P}\left(\operatorname{argmax}_k u_k \neq y\right)"]))
                    continue
                body = sp.sympify(o.expr).subs(dict(zip(m.h, prox_center_symbols(m))))
                out.append(Text(f"{self._describe(o)} (at a fresh sample, $h = \\omega$):"))
                out.append(self.eq(o.tex_name, Mean(body)))
            elif isinstance(o, StateObservable):
                out.append(Text(f"{self._describe(o)} (a function of the order parameters):"))
                out.append(self.eq(o.tex_name, m.state_expression(o.expr)))
            elif self._is_zero_indicator(o):
                lam, s2 = self.p.closed.threshold, THRESHOLD_SCALE
                out.append(Text(f"{self._describe(o)}: soft thresholding sets $\\hat w = 0$ where "
                                f"$|b| \\le {self.x(lam)}$, $b$ centred Gaussian of variance $s^2$ (above),"))
                out.append(self.eq(o.tex_name, sp.erf(lam / (sp.sqrt(2) * s2))))
            else:
                out.append(Text(f"{self._describe(o)} (at the entropic minimiser $\\hat w$):"))
                out.append(Eq(o.tex_name, [rf"\mathbb{{E}}\left[{self.x(o.expr)}\right]_{{w = \hat w}}"]))
        out.append(Text(r"Training loss per weight dimension $d$, regulariser included: $e_t = \min_W "
                        r"\big[\sum_{k} \ell_k + \sum_i \mathcal{R}(W_i)\big] / d$, a sum over $n = \alpha d$ "
                        r"samples, so $e_t / \alpha$ (not $e_t$) compares with the per-sample $\varepsilon_g$:"))
        out.append(Eq("e_t", [r"-\Phi"]))
        return out

    def _is_argmax_error(self, expr) -> bool:
        """Whether a test observable is ``1[argmax_k u_k != y]`` for the cross-entropy's logits ``u``
        (checked at every label value)."""
        lse = self._log_sum_exp(self.m.loss)
        if lse is None:
            return False
        us, y = lse
        for k in range(len(us)):
            wrong = 1 - sp.Mul(*[sp.Heaviside(us[k] - us[j]) for j in range(len(us)) if j != k])
            if sp.expand(sp.sympify(expr).subs(y, k) - wrong) != 0:
                return False
        return True

    def _is_zero_indicator(self, o) -> bool:
        """Whether an entropic observable is ``1[w = 0]`` of a soft-thresholded weight (l1 closed form)."""
        ws = getattr(o, "w", None) or []
        if self.p.closed.entropic_kind != "l1" or len(ws) != 1:
            return False
        t = sp.Symbol("t_nonzero", positive=True)
        e = sp.sympify(o.expr)
        return e.subs(ws[0], 0) == 1 and e.subs(ws[0], t) == 0 and e.subs(ws[0], -t) == 0

    def _parameter_role(self, s: sp.Symbol) -> str:
        """What a model parameter does, read off where it enters the declaration."""
        m = self.m
        p = m.h.shape[1]
        wv = sp.Matrix([sp.Dummy() for _ in range(p)])
        if s in m.regularizer.expression(wv).free_symbols:
            return "strength of the penalty $\\mathcal{R}$"
        if m.channel is not None and s in m.channel.parameters():
            return "parameter of the teacher channel (noise variance or flip probability)"
        data = m.data
        if any(s in sp.sympify(g).free_symbols for a in data.atoms for g in a.gamma):
            return "scale of the token covariances (their eigenvalues)"
        if any(s in sp.sympify(x).free_symbols for a in data.atoms for x in a.pi):
            return "mean or positional projection of the tokens"
        if m.target is not None and s in m.target.free_symbols:
            return "weight of the positional part $A$ of the target"
        if m.noise and any(s in sp.diff(m.loss, z).free_symbols for z in m.noise):
            return "label-noise variance"
        if data.has_clusters:
            return "parameter of the cluster labels' joint law"
        return "model parameter"

    @staticmethod
    def _describe(o) -> str:
        known = {"classification_error": "Test classification error",
                 "angle": "Angle between student and teacher weights",
                 "zero_fraction": "Fraction of zero weights"}
        if o.name in known:
            return known[o.name]
        text = o.description or o.name
        if re.search(r"[=!<>*^_()\\]|sqrt|acos|lam\d", text):
            return r"Observable \texttt{" + o.name.replace("_", r"\_") + "}"
        return text

    # -------------------------------------------------------------- dictionary
    def reductions(self) -> list:
        if not (self.one and self.scalar):
            return []
        z = r", $Z \leftrightarrow Z^{\star}_{\rm out}$" if self.m.channel is not None else ""
        return [Text(r"In the notation of the GLM literature (e.g. Aubin et al., 2020), "
                     r"$\theta \leftrightarrow m$, $V \leftrightarrow \Sigma$, $\hat\theta \leftrightarrow \hat m$, "
                     r"$\hat V \leftrightarrow \hat\Sigma$, $f \leftrightarrow f_{\rm out}$" + z
                     + r"; the equations above reduce to the published ones.")]

    # -------------------------------------------------------------- notation
    def notation(self) -> list[Item]:
        """Every symbol the other sections print, defined once (:func:`used_items` drops the rest)."""
        m, d = self.m, self.d
        a = self.idx
        sa = self.sidx
        ta = self.ta
        one = self.one
        fams = m.families
        items = [Item("d, n", r"input dimension and number of samples, $d, n \to \infty$"),
                 Item(r"\alpha", r"$n/d$, the sample complexity")]
        p = m.h.shape[1]
        if not one:
            items.append(Item(rf"L, {ta}, {self.tb}", "number of tokens; token indices"))
        if m.data.has_clusters:
            items.append(Item("c, s", "cluster labels $c_j$ of the tokens; slot $s = (j, c)$, a token and its "
                                      "cluster"))
        items.append(Item("W, W^*", "student and teacher weights ($d \\times " + str(p) + "$ and $d \\times "
                          + str(m.r_t) + "$); $W_i$ a row"))
        items.append(Item(rf"x{a}, \Sigma{a}", "token and its covariance" if not one else "input and its covariance"))
        pos = any(any(sp.sympify(x) != 0 for x in at.pi) for at in m.data.atoms)
        if pos:
            items.append(Item(rf"p_{ta}, P", f"positional encoding of token ${ta}$; the encodings as rows"))
        items.append(Item(rf"h{a}, h^*{a}", "student and teacher fields"))
        if m.channel is not None or getattr(self, "label_y", None):
            items.append(Item("y", "label"))
        if m.noise:
            items.append(Item("z", "label noise, a standard Gaussian"))
        if m.student is not None:
            items.append(Item("S, T", "student and target attention maps ($L \\times L$)"))
            items.append(Item("y", r"the target sequence $T(h^{*})\, x$"))
        items.append(Item(r"\ell", "per-sample loss"))
        items.append(Item(r"\mathcal{R}", "regulariser of a weight row"))
        matrix_entries = set()
        for P in m.parameters:
            if isinstance(P, sp.MatrixBase):
                matrix_entries |= set(P)
        for s in sorted(set(m.parameter_symbols) - matrix_entries, key=str):
            items.append(Item(self.names.get(s, s.name), PARAMETER_DESCRIPTIONS.get(s) or self._parameter_role(s)))
        if getattr(self, "_matrix_param", None):
            stem, P = self._matrix_param
            items.append(Item(stem, PARAMETER_DESCRIPTIONS.get(P[0, 0]) or "positional attention matrix"))
        ov = (rf"q{sa} = W^\top \Sigma{sa} W / d" if not one else r"q = W^\top \Sigma W / d")
        items.append(Item(rf"q{sa}", rf"${ov}$, the student's self-overlap"))
        if "m" in fams:
            items.append(Item(rf"m{sa}", rf"$W^\top p{a} / \sqrt{{d}}$, the overlap with the positional encoding"
                              if not m.data.has_clusters else
                              r"$W^\top (\mu_s + p_j) / \sqrt{d}$, the overlap with the slot's mean and encoding"))
        if "theta" in fams:
            items.append(Item(rf"\theta{sa}", rf"$W^\top \Sigma{sa} W^* / d$, the teacher-student overlap"))
        items.append(Item(rf"V{sa}", r"the response order parameter: $\beta$ times the variance of the student's "
                                     r"field under the Gibbs measure at inverse temperature $\beta$, as "
                                     r"$\beta \to \infty$"))
        conj = [r"\hat q", r"\hat V"] + ([r"\hat m"] if "m" in fams else []) + ([r"\hat\theta"] if "theta" in fams else [])
        items.append(Item(", ".join(conj), "the conjugates (Lagrange multipliers of the overlaps)"))
        items.append(Item(rf"\rho{sa}", rf"$W^{{*\top}} \Sigma{sa} W^* / d$, the teacher's norm"))
        items.append(Item(rf"\bar\rho{sa}", rf"$\operatorname{{tr}} \Sigma{sa} / d$, the token power"))
        if not self.scalar:
            items.append(Item(r"\Lambda, \mathbb{A}, \mathbb{B}, b, G", "the penalty matrix and the entropic "
                                                                       "field's precision, variance, mean and "
                                                                       "resolvent (matrix form)"))
        if pos:
            items.append(Item(rf"\gamma{sa}, \pi{sa}, \tau, \nu",
                              rf"eigenvalues of $\Sigma{sa}$, projections $\sqrt{{d}}\, e_i^\top p{a}$, teacher "
                              r"components $W^{*\top} e_i$ on the eigenvectors $e_i$, and their joint law"))
        else:
            items.append(Item(rf"\gamma{sa}, \tau, \nu", rf"eigenvalues of $\Sigma{sa}$, teacher components "
                                                         r"$W^{*\top} e_i$ on the eigenvectors $e_i$, and their joint law"))
        items.append(Item(rf"\xi{a}, \eta{a}", "independent standard Gaussians of the energetic average"))
        items.append(Item(rf"\omega{a}", "the prox centre"))
        items.append(Item(rf"\kappa{a}", rf"$\rho{a} - \theta{a}^\top q{a}^{{-1}} \theta{a}$, the teacher's variance "
                                         rf"given the student's field"))
        items.append(Item(rf"\hat h{a}", "the prox: the global minimiser of $F$"))
        items.append(Item(rf"f{a}", rf"$V{a}^{{-1}}(\hat h{a} - \omega{a})$, the scaled prox residual "
                                    r"($f_{\rm out}$)"))
        items.append(Item(r"F", "the energetic bracket"))
        if m.channel is not None:
            items.append(Item(r"P, Z, \mu", r"$P(y \mid \xi)$ the label's law given $\xi$; $Z(y \mid \mu, \kappa)$ "
                                            r"the same as a function of the teacher form's conditional mean $\mu$ and "
                                            r"variance $\kappa$"))
        items.append(Item(r"\Psi_t, \Psi_w, \Psi_y", "trace, entropic and energetic potentials"))
        items.append(Item(r"\Phi", "the free entropy"))
        items.append(Item(r"\mathbb{E}", "average over the Gaussians above (and labels, where there are)"))
        items.append(Item(r"\mathbb{P}", "probability over the same"))
        items.append(Item(r"H", r"$H(x) = \int_x^\infty \frac{e^{-t^2/2}}{\sqrt{2\pi}} dt = "
                                r"\tfrac{1}{2}\operatorname{erfc}(x/\sqrt{2})$, the Gaussian tail"))
        items.append(Item(r"H_2", r"$H_2(a, b; c) = \mathbb{P}(X > a, Y > b)$, $X, Y$ standard Gaussians of "
                                  r"correlation $c$"))
        items.append(Item(r"\mathbf{1}", r"indicator: $\mathbf{1}[A] = 1$ if $A$ holds, else $0$"))
        if isinstance(d.entropic_potential, GaussianMoreauEnvelope):
            items.append(Item(r"b, \hat w" if self.scalar else r"\hat w", "the entropic field and the minimiser of "
                              "the entropic bracket (the proximal map of the regulariser)"))
            names = [self.x(g) for g in d.entropic_potential.gaussians]
            names = [n for n in names if not n.startswith(r"\tau")]  # tau is listed with the spectral law
            items.append(Item(", ".join(names), "standard Gaussians of the entropic average"))
        if self.p.closed.entropic_kind == "l1":
            items.append(Item("s", "standard deviation of the entropic field of the $\\ell_1$ prox"))
        items.append(Item(r"\varepsilon_g", "test error per sample (the loss at a fresh sample)"))
        items.append(Item(r"e_t", "training loss per weight dimension $d$ (regulariser included), "
                                  "$e_t / \\alpha$ per sample"))
        items.append(Item(r"K", "the coupling $\\partial^2 \\Psi_t / \\partial X \\partial \\hat X$ of the order "
                                "parameters $X$ and their conjugates $\\hat X$"))
        return used_items(items, self.printed)


def math_tokens(latex: str) -> set[str]:
    """The symbols a LaTeX string prints, as tokens: ``\\alpha``, ``q``, ``\\hat q``, ``\\mathbb{E}``,
    ``\\mathcal{R}``, ``\\mathbf{1}`` (accents and font commands kept with their letter, the contents of
    ``\\text``/``\\operatorname`` dropped). Text outside ``$...$`` is skipped when ``latex`` is a paragraph."""
    s = re.sub(r"\\(text|operatorname|mathrm|texttt|textit)\{[^{}]*\}", " ", latex)
    s = re.sub(r"\\(hat|bar|tilde|mathbb|mathcal|mathbf|bm)\s*\{\s*(\\?[A-Za-z]+|\d)\s*\}", r"\\\1 \2", s)
    s = re.sub(r"\\(hat|bar|tilde)\s*(\\[A-Za-z]+|[A-Za-z])", r"\\\1 \2", s)
    out = set()
    for mt in re.finditer(r"\\(hat|bar|tilde|mathbb|mathcal|mathbf|bm) (\\[A-Za-z]+|[A-Za-z0-9])|\\[A-Za-z]+|[A-Za-z]",
                          s):
        out.add(mt.group(0).replace("  ", " "))
    return out


def _math_of(text: str) -> str:
    """The math of a paragraph (its ``$...$`` parts)."""
    return " ".join(re.findall(r"\$([^$]*)\$", text))


def used_items(items: list[Item], printed: str) -> list[Item]:
    """The Notation items whose symbols ``printed`` (the math of every other section) uses, closed
    under the items' own definitions (a kept item's meaning may use another symbol)."""
    used = math_tokens(printed)
    keep: list[bool] = [False] * len(items)
    changed = True
    while changed:
        changed = False
        for k, it in enumerate(items):
            if keep[k]:
                continue
            heads = set()
            for part in _top_level_split(it.symbol):  # a symbol is used whatever its indices
                heads |= math_tokens(re.sub(r"[_^](\{[^{}]*\}|\\?[A-Za-z0-9*']+)", "", part))
            if heads & used:
                keep[k] = True
                used |= math_tokens(_math_of(it.meaning))
                changed = True
    return [it for k, it in enumerate(items) if keep[k]]


def _top_level_split(s: str) -> list[str]:
    """``s`` split at the commas outside braces, brackets and parentheses (entries of a tuple)."""
    out, depth, cur = [], 0, ""
    for ch in s:
        depth += ch in "{[("
        depth -= ch in "}])"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


def _squeeze(M: sp.Matrix) -> sp.Expr | sp.Matrix:
    """A 1x1 matrix as its entry."""
    return M[0, 0] if M.shape == (1, 1) else M


def _block(text: str, math) -> list:
    """A paragraph followed by one equation per entry of ``math`` (no left-hand side)."""
    out = [Text(text)]
    for m_ in ([math] if isinstance(math, str) else math):
        parts = re.split(r"(?<=[,:]) \\quad ", m_)
        out.append(Eq("", parts, ""))
    return out


def _cluster_blocks(m, tex) -> list:
    """Slot statistics and the label law of a model with token clusters (docs/explanation/theory.md §8)."""
    data = m.data
    out = [_block("Token clusters: token $j$ is drawn from cluster $c_j$, "
                 "$x_j \\mid c_j = c \\sim \\mathcal{N}(\\mu_{jc}, \\Sigma_{jc})$; "
                 "order parameters carry a slot index $s = (j, c)$, written $1a, 1b, 2a, \\dots$ "
                 "(token, cluster). Slot statistics:",
                 [rf"\bar\rho_{{{lab}}} = {tex(data.rho_bar(s))}, \quad "
                  rf"\rho_{{{lab}}} = {tex(_squeeze(data.rho(s, m.r_t)))}, \quad "
                  rf"P(c_{{{data.slots[s][0] + 1}}} = {CLUSTER_LETTERS[data.slots[s][1]]}) = {tex(data.marginal(s))}"
                  for s, lab in enumerate(data.slot_labels)])]
    labs = ", ".join(data.slot_labels)
    atoms = [rf"\text{{weight }} {tex(a.weight)}: \quad (\gamma_{{s}})_{{s = {labs}}} = "
             rf"({', '.join(tex(g) for g in a.gamma)}), \quad (\pi_{{s}})_{{s = {labs}}} = "
             rf"({', '.join(tex(x) for x in a.pi)})" for a in data.atoms]
    out.append(_block("Spectral law of the slots: atoms of the eigenvalues $\\gamma_s$ of $\\Sigma_s$ and "
                     "the projections $\\pi_s = \\sqrt{d}\\, e_i^\\top(\\mu_s + p_j)$ of the cluster means "
                     "plus encodings:", atoms))
    rows = [rf"P(c = ({', '.join(CLUSTER_LETTERS[c] for c in config)})) = {tex(prob)}"
            for config, prob, _ in data.configurations()]
    out.append(_block("Joint law of the cluster labels $c = (c_1, \\dots, c_L)$:", rows))
    views = [rf"x_{{{l + 1}}} = "
             + " + ".join(rf"e_{{{data.slot_label(s)}}}\, x_{{{data.slot_label(s)}}}" for s in data.token_slots(l))
             for l in range(m.L) if data.clusters[l] > 1]
    out.append(_block("In the loss and the energetic bracket every token parameter "
                     "$x \\in \\{q, V, m, \\theta, \\rho, \\bar\\rho\\}$ is that of the token's cluster, "
                     "written with one-hot label indicators:", views))
    return [x for b in out for x in b]



# ------------------------------------------------------------------------------------------ documents
def _sections(d: Derivation) -> list[tuple[str, list]]:
    return Writer(d).sections()


def blocks(d: Derivation) -> list[tuple[str, list]]:
    """The document as sections of :class:`Text`, :class:`Eq` and :class:`Item` entries."""
    return _sections(d)


def _stamp(d: Derivation) -> str:
    """The freshness stamp of an export (:mod:`replica.artifacts.freshness`)."""
    return current_stamp(getattr(d.model, "declared_in", None), "export").line()


def _escape(s: str) -> str:
    return s.replace("_", r"\_")


def _tex_eq(e: Eq) -> str:
    rel = f" &{e.rel} " if e.rel else " & "
    rows = [e.lhs + rel + e.rows[0]]
    for r in e.rows[1:]:
        rows.append(r"&\quad " + r)
    return r"\begin{align}" + "\n" + (r" \nonumber \\" + "\n").join(rows) + "\n" + r"\end{align}"


def latex_document(d: Derivation) -> str:
    """A standalone LaTeX document of the derivation (article; compiles under revtex4-2/elsarticle too)."""
    return latex_text("Replica-symmetric saddle point", d.model.name, _stamp(d), _sections(d), glossary="Notation")


def markdown_document(d: Derivation) -> str:
    """The same content as Markdown with ``$$`` display blocks."""
    return markdown_text("Replica-symmetric saddle point", d.model.name, _stamp(d), _sections(d),
                         glossary="Notation")


def latex_text(heading: str, name: str, stamp: str, sections: list[tuple[str, list]],
               glossary: str | None = None) -> str:
    """A standalone LaTeX document titled ``heading: name`` with the freshness ``stamp`` on its first line:
    one ``\\section`` per ``(title, items)`` of ``sections``, each :class:`Text` a paragraph and each
    :class:`Eq` an ``align``; the section titled ``glossary`` holds :class:`Item` entries, printed as a
    ``description`` list. The replica-symmetric and the Bayes-optimal exports are written by it."""
    out = [f"% {stamp}",
           r"\documentclass[10pt]{article}",
           r"\usepackage[margin=2cm]{geometry}",
           r"\usepackage{amsmath,amssymb,bm}",
           r"\setlength{\parindent}{0pt}",
           rf"\title{{{heading}: \texttt{{{_escape(name)}}}}}",
           r"\date{Generated by replica}",
           r"\begin{document}", r"\maketitle"]
    for title, items in sections:
        out.append(rf"\section{{{title}}}")
        if title == glossary:
            out.append(r"\begin{description}")
            out += [rf"\item[${it.symbol}$] {it.meaning}" for it in items]
            out.append(r"\end{description}")
            continue
        for it in items:
            out.append(it.text + "\n" if isinstance(it, Text) else _tex_eq(it))
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"


def markdown_text(heading: str, name: str, stamp: str, sections: list[tuple[str, list]],
                  glossary: str | None = None) -> str:
    """The content of :func:`latex_text` as Markdown: ``$$`` display blocks, the ``glossary`` section a list."""
    out = [f"<!-- {stamp} -->", f"# {heading}: `{name}`", ""]
    for title, items in sections:
        out += [f"## {title}", ""]
        if title == glossary:
            out += [f"- ${it.symbol}$: {it.meaning}" for it in items] + [""]
            continue
        for it in items:
            out += markdown_item(it)
    return "\n".join(out)


def markdown_item(it: "Eq | Text") -> list[str]:
    """The Markdown lines of one item of a section: a paragraph, or an ``aligned`` display block."""
    if isinstance(it, Text):
        return [re.sub(r"\\textit\{([^}]*)\}", r"*\1*", it.text), ""]
    rel = f" &{it.rel} " if it.rel else " & "
    body = (r" \\" + "\n").join([it.lhs + rel + it.rows[0]] + [r"&\quad " + r for r in it.rows[1:]])
    return ["$$", r"\begin{aligned}", body, r"\end{aligned}", "$$", ""]


def write_documents(tex_path: str | Path | None, tex_text: Callable[[], str], md_path: str | Path | None,
                    md_text: Callable[[], str]) -> list[Path]:
    """Write the ``.tex`` export ``tex_text()`` and/or the ``.md`` export ``md_text()`` where a path is given;
    returns the written paths."""
    from ..artifacts.outputs import atomic_write_text

    written = []
    if tex_path is not None:
        written.append(atomic_write_text(tex_path, tex_text()))
    if md_path is not None:
        written.append(atomic_write_text(md_path, md_text()))
    return written


def write_latex(d: Derivation, tex_path: str | Path | None = None, md_path: str | Path | None = None
                ) -> list[Path]:
    """Write the ``.tex`` and/or ``.md`` export; returns the written paths."""
    return write_documents(tex_path, lambda: latex_document(d), md_path, lambda: markdown_document(d))
