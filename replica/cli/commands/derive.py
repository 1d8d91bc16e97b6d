"""``replica derive MODEL``: print the saddle-point equations, export LaTeX/Markdown."""
from __future__ import annotations

import argparse

from ...artifacts.outputs import check_output_file
from ...registry import DERIVATIONS_DIR, canonical, load_model


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("derive", help="derive and print the saddle-point equations; export LaTeX",
                       description="Derive the replica-symmetric potentials and saddle-point equations of "
                                   "MODEL with sympy, print them, and optionally export them.")
    p.add_argument("model", help="a declared model (see 'replica models') or a path to a .py file defining 'model'")
    p.add_argument("--latex", metavar="FILE", help="write a standalone LaTeX document")
    p.add_argument("--markdown", metavar="FILE", help="write Markdown with $$ blocks")
    p.add_argument("--write", action="store_true",
                   help="write derivations/<model>.tex and .md (the committed exports)")
    p.add_argument("--rsb", type=int, default=0, metavar="K",
                   help="1: the zero-temperature 1RSB potentials and saddle point instead (docs/how-to/rsb.md); "
                        "--latex/--markdown export them (not with --write)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    # The symbolic pipeline is imported here, not at the top: every other command starts
    # without sympy (0.5 s), since the CLI builds all subcommand parsers.
    from ...symbolic.derivation import Derivation
    from ...symbolic.latex import write_latex

    from .rsb import check_rsb

    if check_rsb(args.rsb) and args.write:
        from ...errors import ParameterError

        raise ParameterError("rsb", "--write writes the committed replica-symmetric exports; export the 1RSB "
                                    "derivation with --latex FILE or --markdown FILE")
    for flag in ("latex", "markdown"):  # before deriving and printing, not after
        if getattr(args, flag):
            check_output_file(getattr(args, flag), flag)
    model = load_model(args.model)
    if args.rsb:
        return _run_rsb(model, args)
    d = Derivation(model)
    print(f"# {model.name}: {model.description}")
    print("\nTrace potential:\n  Psi_t =", d.trace_potential)
    print("\nEntropic potential:\n  Psi_w =", d.entropic_potential)
    print("\nEnergetic potential: Psi_y = -E min_h F(h), F =\n ", d.energetic_potential.bracket)
    for u, e in d.energetic_potential.intermediates.items():
        print(f"  {u} = {e}")
    print_equations("entropic side, closed form", d.saddle_point.entropic)
    print_equations("energetic side; dPsi_y/dx = -E[dF/dx at h = argmin F]", d.saddle_point.energetic)
    tex_path, md_path = args.latex, args.markdown
    if args.write:
        tex_path = tex_path or DERIVATIONS_DIR / f"{canonical(model.name)}.tex"
        md_path = md_path or DERIVATIONS_DIR / f"{canonical(model.name)}.md"
    for path in write_latex(d, tex_path, md_path):
        print(f"\nwrote {path}")
    return 0


def print_equations(side: str, equations) -> None:
    """One block of saddle-point equations, ``lhs = rhs`` a line, under a heading naming the ``side``."""
    import sympy as sp

    print(f"\nSaddle-point equations ({side}):")
    for eq in equations:
        print(f"  {eq.lhs} = {sp.sstr(eq.rhs)}")


def _run_rsb(model, args: argparse.Namespace) -> int:
    """``--rsb 1``: print the 1RSB saddle point and export it."""
    import sympy as sp

    from ...artifacts.outputs import atomic_write_text
    from ...symbolic.rsb import RSBDerivation
    from ...symbolic.rsb_latex import latex_document, markdown_document

    d = RSBDerivation(model)
    print(f"# {model.name} (zero-temperature 1RSB): {model.description}")
    print("\nTrace potential:\n  Psi_t =", d.trace_potential)
    print("\nEntropic potential:\n  Psi_w =", d.entropic_potential if not hasattr(d.entropic_potential, "envelope")
          else "(1/m) E_out log E_in exp(-m min_w B(w)),  B = " + str(d.entropic_potential.envelope.bracket))
    env = d.energetic_potential.envelope
    print("\nEnergetic potential: Psi_y = (1/m) E_out log E_in exp(-m min_h F(h)), F =\n ", env.bracket)
    for u, e in env.intermediates.items():
        print(f"  {u} = {e}")
    print_equations("entropic side", d.saddle_point.entropic)
    print_equations("energetic side; dPsi_y/dx = -E_out <dF/dx at h = argmin F>_in", d.saddle_point.energetic)
    print("\nComplexity (the Parisi parameter is where it vanishes):\n  Sigma =", sp.sstr(d.complexity))
    if args.latex:
        print(f"\nwrote {atomic_write_text(args.latex, latex_document(d))}")
    if args.markdown:
        print(f"\nwrote {atomic_write_text(args.markdown, markdown_document(d))}")
    return 0
