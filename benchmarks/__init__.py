"""Benchmarks of the replica toolkit (``python -m benchmarks --help``; issue 9).

:mod:`benchmarks.run` times the generated solver against a notebook-style baseline
(:mod:`benchmarks.notebook_baseline`), converged points, the phase diagram, the
6-dimensional models and the simulator; :mod:`benchmarks.quadrature_6d` compares
quadrature rules for the 6-dimensional averages (issue 8).
"""
