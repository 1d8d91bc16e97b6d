"""``python -m benchmarks``: see :mod:`benchmarks.run`."""
from benchmarks.run import main

raise SystemExit(main())
