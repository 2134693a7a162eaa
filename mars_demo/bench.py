"""``python -m mars_demo.bench``: the speed benchmark's documented entry point.

The benchmark lives in :mod:`mars_demo.devtools.bench` (a development tool: the library never
imports it); this module only starts its command line.
"""

import sys

from mars_demo.devtools.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
