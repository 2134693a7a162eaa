"""``python -m mars_demo``: see :mod:`mars_demo.cli`."""

import sys

from .cli import main

sys.exit(main())
