"""Per-model declarations (each a short file), their exported LaTeX and generated solvers.

Every module here defines ``model`` (a :class:`replica.Model`) or a ``build(**options)``
function returning one; :mod:`replica.registry` lists them for ``replica models``.
``ALIASES`` gives short names the command line accepts for some of them (read as a literal by
:func:`replica.registry.aliases`, never imported by the library). ``CHECK_POINTS`` says
where ``python -m numerics.check_models`` checks each model against its simulation (read as a literal
by :func:`numerics.check_models.check_points`): a sample complexity, a branch, the model's defaults
otherwise; cheap checks first; a model may have more than one row.
"""

ALIASES = {"attention": "attention_tied"}

CHECK_POINTS = [
    {"model": "ridge", "alpha": 2.0},
    {"model": "lasso", "alpha": 2.0},
    {"model": "logistic", "alpha": 2.0},
    {"model": "hinge", "alpha": 2.0},
    {"model": "perceptron_probit", "alpha": 2.0},
    {"model": "softmax_argmax3", "alpha": 2.0},
    {"model": "linear_attention", "alpha": 2.0, "branch": "semantic"},
    {"model": "attention_tied", "alpha": 2.0, "branch": "semantic"},
    {"model": "attention_elastic_net", "alpha": 2.0, "branch": "semantic"},
    {"model": "attention_clusters", "alpha": 2.0, "branch": "semantic"},
    # the attention model also where its RS fixed point is unstable (docs/explanation/replicon.md)
    {"model": "attention_tied", "alpha": 1.0, "branch": "semantic"},
    {"model": "attention_tied", "alpha": 0.5, "branch": "positional"},
    # six-dimensional averages: the theory's error bars (refinement, jump check) did not finish in
    # 47 min (attention_L3, default rule) on the shared 2-core machine, the fixed point itself takes
    # seconds; the default rule's own accuracy is ~1e-3 relative (docs/how-to/extensions.md)
    {"model": "attention_L3", "alpha": 2.0, "branch": "semantic", "theory_bars": False},
    {"model": "attention_rank2", "alpha": 2.0, "branch": "semantic", "theory_bars": False},
    {"model": "attention_untied", "alpha": 2.0, "branch": "semantic", "theory_bars": False},
]
