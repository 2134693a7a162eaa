"""Recipes: every choice where this project and the published MARS code differ, in one place.

A recipe names a whole set of pipeline choices, so that one word switches all of them:

- ``"default"``: this project's documented behaviour, which avoids the published code's bugs;
- ``"paper-code"``: the choices of the code that produced the paper's numbers (github
  Ybakman/LLM_Uncertainty), wherever they are well defined.

Where the published code's result is undefined (it hangs when no phrase aligns or the first word
has no sub-token, errors on answers cut at 512 importance tokens, drops id 1, the BOS token of
Llama and Mistral, from prompts before re-scoring), ``"paper-code"`` does what ``"default"`` does
and the engine says so in a warning. The README's table "The paper's code, point by point" gives
every row with its source.

Pure Python: no torch, transformers, numpy or gradio.
"""

from __future__ import annotations

import copy
from typing import Any

from .settings import RECIPES, OptionError, Settings

# The choices that are also Settings fields. A recipe value of None leaves the Settings value as
# it is; any other value replaces it (see apply_recipe), so the recorded settings say what ran.
SETTINGS_FIELDS = ("prompt", "max_new_tokens", "cluster_rule", "normalization")

_CHOICES: dict[str, dict[str, Any]] = {
    "default": {
        "recipe": "default",
        # generation (models/llm.py)
        "prompt": None,  # Settings.prompt: None = chat template for instruction models
        "prompt_trailing_space": False,  # the paper prompt ends with "Answer:"
        "stop_strings": None,  # the prompt preset's own: paper "." and newline; chat none
        "keep_stop": False,  # the "." that ends an answer is cut, not scored
        "banned_strings": (),  # no token is banned
        "top_k": None,  # top-k off (transformers top_k=0)
        "max_new_tokens": None,  # Settings.max_new_tokens (64 by default)
        "logprob_source": "generation",  # generation's raw logits, no second forward pass
        # importance -> tokens (core/alignment.py, core/scoring.py)
        "alignment_rule": "default",  # align_phrases(..., rule=...)
        "normalization": None,  # Settings.normalization ("sum" by default)
        # NLI and clustering (models/nli.py, core/clustering.py)
        "nli_input_format": "pair",  # NLIModel.matrix(..., input_format=...)
        "nli_dtype": "auto",  # NLIModel.load(..., dtype=...): float16 on CUDA
        "clustering_algorithm": "first-member",  # semantic_clusters(..., algorithm=...)
        "cluster_rule": None,  # Settings.cluster_rule ("strict" by default)
        "cluster_by_text": False,  # semantic_clusters(..., answers=None)
    },
    "paper-code": {
        "recipe": "paper-code",
        "prompt": "paper",  # the few-shot prompt, for every model
        "prompt_trailing_space": True,  # ends with "Answer: " as published
        "stop_strings": (".",),  # "." ends an answer (an end-of-sequence id there) ...
        "keep_stop": True,  # ... and stays in its text: scored, shown to the importance model
        "banned_strings": (":", "\n"),  # banned tokens (bad_words_ids), not stop strings
        "top_k": 50,  # the transformers default then
        "max_new_tokens": 128,
        # The published code re-scores with a second fp16 forward pass after dropping id 1
        # (Llama's BOS): a bug, not copied.
        "logprob_source": "generation",
        "alignment_rule": "paper-code",
        "normalization": "sum",  # Table 1; the medical run's "sum-softmax" is an explicit option
        "nli_input_format": "paper-code",
        "nli_dtype": "float32",
        "clustering_algorithm": "all-pairs",
        "cluster_rule": "lenient",
        "cluster_by_text": True,  # semantic_clusters(..., answers=the sample texts)
    },
}


def recipe_choices(recipe: str) -> dict[str, Any]:
    """Every choice that ``recipe`` switches, as a new dict (safe to modify).

    Keys and what reads them:

    - ``prompt`` ("paper" | None), ``max_new_tokens`` (int | None), ``normalization``
      ("sum" | None), ``cluster_rule`` ("lenient" | None): Settings fields; None keeps the
      Settings value, anything else replaces it (:func:`apply_recipe`).
    - ``prompt_trailing_space`` (bool): the paper prompt ends with "Answer: " instead of
      "Answer:".
    - ``stop_strings`` (tuple | None): strings that end an answer; None = the prompt preset's.
    - ``keep_stop`` (bool): the stop string stays in the answer's text and is scored.
    - ``banned_strings`` (tuple): tokens the LLM may not generate.
    - ``top_k`` (int | None): top-k of sampling; None = off.
    - ``logprob_source`` ("generation"): where token log-probs come from.
    - ``alignment_rule``: ``core.alignment.align_phrases(..., rule=)``.
    - ``nli_input_format``: ``NLIModel.matrix(..., input_format=)``; ``nli_dtype``:
      ``NLIModel.load(..., dtype=)``.
    - ``clustering_algorithm``: ``core.clustering.semantic_clusters(..., algorithm=)``;
      ``cluster_by_text`` (bool): pass the sample texts as ``answers=`` so identical texts are
      one distinct answer.

    Raises:
        OptionError: an unknown recipe.

    >>> recipe_choices("paper-code")["clustering_algorithm"]
    'all-pairs'
    """
    if recipe not in RECIPES:
        raise OptionError(f"recipe must be one of {', '.join(RECIPES)}; got {recipe!r}")
    return copy.deepcopy(_CHOICES[recipe])


def apply_recipe(settings: Settings) -> Settings:
    """``settings`` with the Settings fields its recipe fixes (:data:`SETTINGS_FIELDS`) set.

    ``"default"`` changes nothing; ``"paper-code"`` sets prompt "paper", max_new_tokens 128,
    cluster_rule "lenient" and normalization "sum".

    >>> s = apply_recipe(Settings(recipe="paper-code", max_new_tokens=32))
    >>> s.max_new_tokens, s.cluster_rule, s.prompt
    (128, 'lenient', 'paper')
    """
    choices = recipe_choices(settings.recipe)
    fixed = {name: choices[name] for name in SETTINGS_FIELDS if choices[name] is not None}
    return settings.replace(**fixed) if fixed else settings


def recipe_notes(recipe: str, *, bos_token_id: int | None = None) -> list[str]:
    """Warnings a run of ``recipe`` should show because it knowingly departs from the published code.

    Only ``"paper-code"`` has any: when the LLM's beginning-of-sequence id is 1 (Llama, Mistral),
    the published code re-scored answers after deleting every id 1 (its padding id) from the
    prompt, so it scored them without the BOS token; this recipe keeps the log-probs of
    generation, with the BOS token, and says so.

    >>> recipe_notes("paper-code", bos_token_id=1)[0][:40]
    'Log-probs come from generation with the '
    >>> recipe_notes("paper-code", bos_token_id=151643), recipe_notes("default", bos_token_id=1)
    ([], [])
    """
    recipe_choices(recipe)  # checks the name
    if recipe == "paper-code" and bos_token_id == 1:
        return [
            "Log-probs come from generation with the prompt's beginning-of-sequence token; "
            "the published code re-scored without it (it deleted every token id 1, its "
            "padding id, which is also this model's BOS), so scores differ slightly from it."
        ]
    return []
