"""Development tools beside the library: the tiny-model factory and trainer (:mod:`.tiny`), the
GGUF writer for llama.cpp tests (:mod:`.gguf`) and the speed benchmark (:mod:`.bench`).

They import the library; the library (``import mars_demo``, the engine, the page, ``python
app.py``) never imports them. Only the command line's ``make-tiny-models`` loads :mod:`.tiny`,
when that command runs.
"""
