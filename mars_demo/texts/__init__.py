"""Every user-facing string of the page and of ``app.py``, in one place: ``texts.NAME``.

Strings with ``{placeholders}`` are filled with ``str.format``; the UI escapes every value that
comes from a question, an answer or an exception before it goes into HTML, so none of these
templates needs to care about escaping. By part of the page:

- :mod:`.page`: the header, banner, input, settings, answer, tables, plots, progress, ``app.py``,
  the controls, pasted answers and the API;
- :mod:`.public`: public mode and per-visitor limits, displays that must not mislead, and the
  chance of being right (calibration);
- :mod:`.views`: the Evaluation view, the verdict, and the answer explained (why MARS differs).

A page speaks to its visitors: no text it shows names a command-line flag, an environment
variable or a command (those are the host's, in the README and the docs). The texts that only
the host sees (``python app.py --help``, its start-up errors, its log) are :data:`HOST_ONLY`;
``tests/test_visitor_texts.py`` checks both.
"""

from .page import *  # noqa: F403
from .public import *  # noqa: F403
from .views import *  # noqa: F403

#: Texts for the host alone (``app.py``'s help, start-up errors and log), never shown on a page.
HOST_ONLY = (
    "APP_DESCRIPTION", "APP_ZEROGPU_LOG", "APP_PUBLIC_LOG", "APP_CALIBRATION_MODELS",
    "APP_CALIBRATION_LLM_LATER", "ACCESS_SWITCH_PUBLIC", "ACCESS_BEM_BOTH", "ACCESS_BEM_LOCAL",
    "ACCESS_BAD_PROXY", "ACCESS_BAD_HOST",
)
