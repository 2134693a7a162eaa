"""A quiet terminal: what the command line lets the model libraries print on stderr.

By default (no ``--verbose``), just before the command runs the models:

- transformers' notices that tell a user of this project nothing are dropped (:data:`NOISE`:
  the tokenizer's "legacy behaviour" paragraph, which every GGUF tokenizer prints);
- every other transformers warning is shown once, however often the library logs it;
- the libraries' progress bars are off: transformers' and huggingface_hub's own (checkpoint
  shards, a GGUF tokenizer's conversion) and the de-quantizing bar of a GGUF file, which
  transformers draws with ``tqdm`` directly (its ``tqdm`` is given ``disable=True``).

``--verbose`` leaves the libraries as they are. Python warnings are shown as Python shows them
(once per place). Importing this module imports nothing heavy; :func:`quiet` imports
transformers, which the models are about to import anyway.
"""

from __future__ import annotations

import functools
import logging

#: the beginnings of transformers' messages that are dropped: notices about the library's own
#: defaults, which this project sets as it needs them
NOISE = (
    "You are using the default legacy behaviour of the",
)


class OnceEach(logging.Filter):
    """Drops :data:`NOISE`, and every message it has let through before."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text.startswith(NOISE) or text in self.seen:
            return False
        self.seen.add(text)
        return True


_DONE: list[OnceEach] = []


def quiet() -> None:
    """Quiet the model libraries as the module doc says (once per process)."""
    if _DONE:
        return
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging as hf_logging

    once = OnceEach()
    root = hf_logging._get_library_root_logger()  # noqa: SLF001 (its handler is made here)
    for handler in root.handlers:  # a filter of the handler sees every transformers logger's
        handler.addFilter(once)
    hf_logging.disable_progress_bar()
    disable_progress_bars()
    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_loading
    except ImportError:  # a transformers without GGUF loading: no bar to silence
        pass
    else:
        gguf_loading.tqdm = functools.partial(gguf_loading.tqdm, disable=True)
    _DONE.append(once)
