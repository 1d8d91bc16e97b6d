"""The numeric layer (numpy/numba, no sympy): quadrature rules, proximal maps, the per-node
kernels and their compiled unit, integrators, the fixed-point solver, error bars, stability.
It reads generated modules only; it never imports :mod:`replica.symbolic` or sympy."""
