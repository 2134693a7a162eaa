"""Model adapters: the LLM (in-process or behind a server), the importance functions and the NLI
model, and the registry that loads and caches them.

- :mod:`.contract`: what the engine asks of an LLM (``LanguageModel``, ``GenerationRequest``);
- :mod:`.prompts`, :mod:`.decoding`: prompts and answer text, shared by both LLM adapters;
- :mod:`.llm` (Hugging Face; how it loads and decodes: :mod:`.llm_options`), :mod:`.endpoint` with :mod:`.server` and :mod:`.completions`
  (an OpenAI-compatible server over HTTP);
- :mod:`.importance`, :mod:`.nli`: the importance functions and the NLI model;
- :mod:`.registry`: which models a ``Settings`` names, loaded once and cached.

Importing this package is cheap: torch and transformers are imported when a model is loaded.
"""
