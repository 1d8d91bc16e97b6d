"""Certified reference solver for the paper's tied attention model (issue 14).

An independent implementation of docs/explanation/theory.md §1–6 for ``L = 2``, ``r = r_t = 1`` (it does not import
``replica``'s solver, prox or quadrature), built to *settle* numbers rather than to be fast:

* :mod:`.model` -- the loss, bracket, targets and the closed-form entropic side, by hand;
* :mod:`.globalmin` -- the certified global minimum of the 2-D bracket (branch and bound with
  rigorous interval bounds and convex exclusion zones);
* :mod:`.inner`, :mod:`.energetic` -- energetic averages with every switch of the global
  minimiser located (adaptive, error-estimated), and plain tensor Gauss-Hermite for comparison;
* :mod:`.fixedpoint` -- Newton on the reduced saddle point, observables;
* :mod:`.continuation` -- pseudo-arclength continuation through folds;
* ``python -m benchmarks.certify`` -- the tables and figures of ``docs/reference/certified.md``.
"""
