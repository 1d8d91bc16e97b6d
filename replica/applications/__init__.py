"""Applications: studies built on the generic core, the way a new architecture's study would be.

The core (:mod:`replica.numeric.solver`, :mod:`replica.phase`, ...) knows branches, crossings and
baselines of *any* model that declares them. An application package adds what belongs to one
line of work: its parameters' names and command-line flags, the branch pair it compares, its
paper's constants and figures. :mod:`replica.applications.attention` is the study of the seed
paper (Cui et al. 2024: tied dot-product attention, semantic vs positional learning).
"""
