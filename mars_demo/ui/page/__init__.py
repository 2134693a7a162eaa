"""The Ask page: its layout (``layout.py``, built section by section), its events
(``events.py``), the one declaration of every result panel (``panels.py``), the handlers
(``controller.py``), the expected wait (``waits.py``), the example questions' analyses kept on
disk (``example_store.py``) and made in the background at start (``example_warm.py``), the banner
(``banner.py``) and the page's links (``links.py``).

It may import :mod:`mars_demo.ui.work`, :mod:`mars_demo.ui.draw`, :mod:`mars_demo.ui.views` and
:mod:`mars_demo.ui.guards`; only :mod:`mars_demo.ui.launch` and the package's ``__init__``
import it (tests/test_layers.py).
"""

from pathlib import Path

#: the page's script, style and example questions (``ui/assets/``)
ASSETS = Path(__file__).resolve().parents[1] / "assets"
