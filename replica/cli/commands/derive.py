"""``replica derive MODEL``: print the saddle-point equations, export LaTeX/Markdown."""
from __future__ import annotations

import argparse

from ...artifacts.outputs import check_output_files
from ...registry import declaration_path, load_model


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("derive", help="derive and print the saddle-point equations; export LaTeX",
                       description="Derive the replica-symmetric potentials and saddle-point equations of "
                                   "MODEL with sympy, print them, and optionally export them.")
    p.add_argument("model", help="a declared model (see 'replica models') or a path to a .py file defining 'model'")
    p.add_argument("--latex", metavar="FILE", help="write a standalone LaTeX document")
    p.add_argument("--markdown", metavar="FILE", help="write Markdown with $$ blocks")
    p.add_argument("--write", action="store_true",
                   help="write <model>.tex and .md beside the declaration (for a shipped model: "
                        "derivations/<model>.tex and .md, the committed exports)")
    p.add_argument("--bayes", action="store_true",
                   help="the Bayes-optimal free entropy and saddle point instead (prior, Z_0, Z_out, f_a, g_out; "
                        "docs/how-to/bayes_optimal.md)")
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

    if check_rsb(args.rsb, args) and args.write:
        from ...errors import ParameterError

        raise ParameterError("rsb", "--write writes the committed replica-symmetric exports; export the 1RSB "
                                    "derivation with --latex FILE or --markdown FILE")
    tex_path, md_path = args.latex, args.markdown
    declaration = declaration_path(args.model)
    if args.write:  # beside the declaration: a user's file never writes into the package's derivations/
        stem = declaration.stem + ("_bayes" if args.bayes else "")
        tex_path = tex_path or declaration.with_name(stem + ".tex")
        md_path = md_path or declaration.with_name(stem + ".md")
    # before deriving and printing, not after
    check_output_files({"latex": tex_path, "markdown": md_path}, {"model": declaration})
    model = load_model(args.model)
    if args.bayes:
        return _run_bayes(model, tex_path, md_path)
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
    for path in write_latex(d, tex_path, md_path):
        print(f"\nwrote {path}")
    return 0


def _run_bayes(model, tex_path, md_path) -> int:
    """``replica derive MODEL --bayes``: print the Bayes-optimal equations, write the exports asked for."""
    import sympy as sp

    from ...symbolic.bayes import BayesDerivation
    from ...symbolic.bayes_latex import write_bayes_latex

    d = BayesDerivation(model)
    out, inp = d.output, d.input
    print(f"# {model.name}: Bayes-optimal inference (teacher fields per token K = {d.K})")
    print(f"\nPrior: {inp.prior!r}" + (f", rho = E w^2 = {d.rho}" if d.rho is not None else ""))
    if inp.log_z0 is not None:
        print("  log Z_0(B, A) =", sp.sstr(inp.log_z0))
        print("  f_a = d log Z_0 / dB =", [sp.sstr(f) for f in inp.f_a])
    else:
        print("  log p(w) =", inp.log_density)
    print("\nLabel law: Z_out(y; omega, V) =", sp.sstr(out.Z))
    print("  g_out = d log Z_out / d omega =", [sp.sstr(g) for g in out.g])
    print("\nSaddle point: q = E[f_a f_a^T],  qhat = alpha E[sum_y Z_out g_out g_out^T]  (omega = q^(1/2) xi, V = rho - q)")
    for path in write_bayes_latex(d, tex_path, md_path):
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
