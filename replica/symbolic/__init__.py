"""The symbolic layer (sympy): a model's declaration -- fields, data law, channels, losses,
penalties, observables, order parameters -- its replica potentials, saddle-point equations,
symmetries and LaTeX/Markdown export. Nothing in :mod:`replica.numeric` imports it, and it imports
nothing of :mod:`replica.numeric` (what both share is :mod:`replica.interface`)."""
