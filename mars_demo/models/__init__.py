"""Model adapters: the LLM (in-process or behind a server), the importance functions and the NLI
model, and the registry that loads and caches them.

- :mod:`.contract`: what the engine asks of an LLM (``LanguageModel``, ``GenerationRequest``)
  and what a backend declares (``Backend``, ``Capabilities``);
- :mod:`.backends`: the LLM backends, and which one runs some settings;
- :mod:`.prompts`, :mod:`.decoding`: prompts and answer text, shared by every backend;
- the backends: :mod:`.llm` (Hugging Face transformers; how it loads and decodes:
  :mod:`.llm_options`) and :mod:`.endpoint` with :mod:`.server` and :mod:`.completions` (an
  OpenAI-compatible server over HTTP);
- :mod:`.importance`, :mod:`.nli`: the importance functions and the NLI model;
- :mod:`.registry`: which models a ``Settings`` names, loaded once and cached.

Importing this package is cheap: torch and transformers are imported when a model is loaded.
"""
