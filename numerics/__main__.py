"""``python -m numerics ...`` is ``python -m numerics.simulate ...``."""

import sys

from .simulate import main

sys.exit(main())
