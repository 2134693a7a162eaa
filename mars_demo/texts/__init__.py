"""Every user-facing string of the page and of ``app.py``, in one place: ``texts.NAME``.

Strings with ``{placeholders}`` are filled with ``str.format``; the UI escapes every value that
comes from a question, an answer or an exception before it goes into HTML, so none of these
templates needs to care about escaping. By part of the page:

- :mod:`.page`: the header, banner, input, settings, answer, tables, plots, progress, ``app.py``,
  the controls, pasted answers and the API;
- :mod:`.public`: public mode and per-visitor limits, displays that must not mislead, and the
  chance of being right (calibration);
- :mod:`.views`: the Evaluation view, and the answer explained (why MARS differs).
"""

from .page import *  # noqa: F403
from .public import *  # noqa: F403
from .views import *  # noqa: F403
