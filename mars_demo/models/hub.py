"""Are the models an analysis names here? Asked before any of them loads, in about a second.

Loading a model the Hugging Face cache does not hold, with no network, takes transformers 20 to
90 s of retried requests per model (a few hundred warning lines) before it fails, one model at
a time. :func:`missing` answers for all of them at once instead: a local folder or file must
exist; a Hub id must be in the cache, unless the Hub answers. The Hub is asked at most once per
process (one request, a few seconds at most, no retries); when it cannot be reached the
process goes offline (``HF_HUB_OFFLINE``), so the models in the cache load without trying the
network again. Pure Python and ``huggingface_hub``'s constants: no torch or transformers.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

from .gguf import named_gguf

log = logging.getLogger(__name__)

#: seconds the one request to the Hub may take
PROBE_TIMEOUT_S = 3.0
_REACHABLE: list[bool] = []  # the answer of the one probe, once asked
_WENT_OFFLINE: list[bool] = []  # set when a failed probe took the process offline
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Named:
    """A model an analysis names: what it is ("the NLI model"), the option that names it
    (``--nli``) and its id or path."""

    what: str
    option: str
    source: str

    def __str__(self) -> str:
        return f"the {self.what} {self.source} ({self.option})"

    def why(self, reason: str) -> str:
        """It, with the reason it cannot load: "the NLI model x (--nli: not in the cache)"."""
        return f"the {self.what} {self.source} ({self.option}: {reason})"


def offline() -> bool:
    """Whether the process does not reach the Hub (``HF_HUB_OFFLINE``, or a probe failed)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def is_path(source: str) -> bool:
    """Whether ``source`` names a local folder or file rather than a Hub id ('org/name')."""
    return (source.startswith((".", "/", "~")) or source.count("/") > 1
            or named_gguf(source) or os.path.exists(os.path.expanduser(source)))


def cached(repo_id: str) -> bool:
    """Whether the Hugging Face cache holds a snapshot of the model ``repo_id``."""
    from huggingface_hub import constants

    folder = os.path.join(constants.HF_HUB_CACHE, "models--" + repo_id.replace("/", "--"),
                          "snapshots")
    try:
        return any(os.scandir(folder))
    except OSError:
        return False


def missing(named: list[Named]) -> list[tuple[Named, str]]:
    """The models of ``named`` that cannot be loaded here, in order, each with why: a path that
    does not exist, or a Hub id that is not in the cache while the Hub cannot be reached (asked
    once; when it cannot, the process goes offline)."""
    hub = [m for m in named if not is_path(m.source)]
    if hub and not offline() and not reachable(hub[0].source):
        go_offline()
    out = []
    for model in named:
        if model in hub:
            if offline() and not cached(model.source):
                out.append((model, "not in the Hugging Face cache"))
        elif not os.path.exists(os.path.expanduser(model.source)):
            out.append((model, "no such folder or file"))
    return out


def reachable(repo_id: str) -> bool:
    """Whether the Hub answers (one HEAD request about ``repo_id``, asked once per process;
    any HTTP answer counts, a network failure or no answer within :data:`PROBE_TIMEOUT_S` does
    not)."""
    with _LOCK:
        if not _REACHABLE:
            _REACHABLE.append(_probe(repo_id))
        return _REACHABLE[0]


def _probe(repo_id: str) -> bool:
    import urllib.error
    import urllib.request

    from huggingface_hub import constants

    answered: list[bool] = []

    def ask() -> None:
        request = urllib.request.Request(f"{constants.ENDPOINT}/api/models/{repo_id}",
                                         method="HEAD")
        try:
            urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S).close()
            answered.append(True)
        except urllib.error.HTTPError:  # the Hub answered (404, 401...): it is reachable
            answered.append(True)
        except (OSError, ValueError):  # no name resolution, no route, refused, timed out
            answered.append(False)

    # a thread: name resolution has its own timeout, which urlopen's does not bound
    probe = threading.Thread(target=ask, daemon=True, name="mars-demo-hub-probe")
    probe.start()
    probe.join(PROBE_TIMEOUT_S)
    return bool(answered and answered[0])


def go_offline() -> None:
    """From now on this process does not try the Hub: huggingface_hub's and transformers'
    offline switches (both read at import time, so set where they live) and the variable
    (for what is imported later)."""
    import sys

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return
    log.info("the Hugging Face Hub cannot be reached: models load from the cache only")
    _WENT_OFFLINE.append(True)
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants.HF_HUB_OFFLINE = True
    hub = sys.modules.get("transformers.utils.hub")
    if hub is not None and hasattr(hub, "_is_offline_mode"):
        hub._is_offline_mode = True


def message(gone: list[tuple[Named, str]]) -> str:
    """One message naming every missing model, its option, and the offline path."""
    listed = "; ".join(model.why(reason) for model, reason in gone)
    hub = any(why != "no such folder or file" for _, why in gone)
    return (
        f"{'This model is' if len(gone) == 1 else 'These models are'} not on this machine: "
        f"{listed}."
        + ((" The Hugging Face Hub cannot be reached from here" if _WENT_OFFLINE else
            " HF_HUB_OFFLINE is set, so the Hugging Face Hub is not asked")
           + ": download them once with network access, or give local folders." if hub else "")
        + " To run offline, `python -m mars_demo make-tiny-models DIR` writes tiny models "
        "(then --llm DIR/llm --importance DIR/importance --nli DIR/nli)"
        + ("; HF_HUB_OFFLINE=1 skips the Hub without waiting for it." if _WENT_OFFLINE else ".")
    )
