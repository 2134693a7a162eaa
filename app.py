"""The MARS Demo page: ``python app.py [--llm ID_OR_DIR] [--host H] [--port P] [--share]``.

The Hugging Face Space's entry point (README.md's ``app_file``). Every flag, its environment
variable (``MARS_DEMO_*``) and the launch itself live in :mod:`mars_demo.serve`;
``python app.py --help`` lists them.
"""

from __future__ import annotations

import sys

from mars_demo.serve import main

if __name__ == "__main__":
    sys.exit(main())
