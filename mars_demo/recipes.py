"""Recipes: every choice where this project and the published MARS code differ, in one place.

A recipe names a whole set of pipeline choices, so that one word switches all of them:

- ``"default"``: this project's documented behaviour, which avoids the published code's bugs;
- ``"paper-code"``: the choices of the code that produced the paper's numbers (github
  Ybakman/LLM_Uncertainty), wherever they are well defined;
- ``"truthtorchlm"``: the choices of the authors' later library, TruthTorchLM 0.1.19: its MARS
  (phrase weights ``softmax(score / 0.1)``; a whitespace-only token joins the phrase before
  it; phrases that share a token are merged with the mean of their scores), with which this
  project's scores equal that library's within 1e-6, and its semantic clustering (first
  member, lenient: no contradiction either way), with which the semantic entropy equals its
  ``SemanticEntropy`` on answers that are all distinct. Its counting of a repeated answer n^2
  times is a defect of the library and is not reproduced (docs/paper-code.md). Everything else
  is ``"default"``'s.

Where the published code's result is undefined (it hangs when no phrase aligns or the first word
has no sub-token, errors on answers cut at 512 importance tokens, drops id 1, the BOS token of
Llama and Mistral, from prompts before re-scoring), ``"paper-code"`` does what ``"default"`` does
and the engine says so in a warning. The table of docs/paper-code.md, "The paper's code, point by
point", gives every row with its source.

A call that enters the engine resolves its recipe once (:func:`resolve`); from there on every
part reads the :class:`Recipe`'s fields, never its name.

Pure Python: no torch, transformers, numpy or gradio.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import OptionError
from .settings import RECIPES, Settings

# The choices that are also Settings fields. A recipe value of None leaves the Settings value as
# it is; any other value replaces it (see Recipe.apply), so the recorded settings say what ran.
SETTINGS_FIELDS = ("prompt", "max_new_tokens", "cluster_rule", "normalization",
                   "softmax_temperature")


@dataclass(frozen=True)
class Recipe:
    """Every choice a recipe switches, and who reads it.

    The Settings fields (:data:`SETTINGS_FIELDS`): ``prompt`` ("paper" | None),
    ``max_new_tokens`` (int | None), ``normalization`` ("sum" | None), ``cluster_rule``
    ("lenient" | None); None keeps the Settings value, anything else replaces it
    (:meth:`apply`).
    """

    name: str  # "default" | "paper-code": recorded as the result's settings.recipe
    # generation (models/prompts.py, engine/generation.py, the LLM adapters)
    prompt: str | None  # a Settings field (see the class docstring)
    prompt_trailing_space: bool  # the paper prompt ends with "Answer: " instead of "Answer:"
    stop_strings: tuple[str, ...] | None  # strings that end an answer; None = the preset's
    keep_stop: bool  # the stop string stays in the answer's text and is scored
    banned_strings: tuple[str, ...]  # tokens holding them are never generated
    top_k: int | None  # top-k of sampling; None = off
    max_new_tokens: int | None  # a Settings field
    logprob_source: str  # where generated answers' log-probs come from: "generation"
    # importance -> tokens (core/alignment.py, core/scoring.py)
    alignment_rule: str  # core.alignment.align_phrases(..., rule=)
    normalization: str | None  # a Settings field
    # NLI and clustering (models/nli.py, core/clustering.py)
    nli_input_format: str  # NLIModel.matrix(..., input_format=)
    nli_dtype: str  # the NLI model's dtype (models.registry.load_nli(..., dtype=))
    clustering_algorithm: str  # core.clustering.semantic_clusters(..., algorithm=)
    cluster_rule: str | None  # a Settings field
    cluster_by_text: bool  # pass the sample texts as answers=: identical texts are one answer
    # who decides a pair of identical texts: "model" or "rule" (core.clustering.IDENTICAL_TEXTS)
    identical_texts: str
    softmax_temperature: float | None = None  # a Settings field

    def apply(self, settings: Settings) -> Settings:
        """``settings`` with the Settings fields this recipe fixes (:data:`SETTINGS_FIELDS`).

        >>> s = recipe_of("paper-code").apply(Settings(recipe="paper-code", max_new_tokens=32))
        >>> s.max_new_tokens, s.cluster_rule, s.prompt
        (128, 'lenient', 'paper')
        """
        fixed = {name: getattr(self, name) for name in SETTINGS_FIELDS
                 if getattr(self, name) is not None}
        return settings.replace(**fixed) if fixed else settings

    def notes(self, *, bos_token_id: int | None = None) -> list[str]:
        """Warnings a run of this recipe should show because it knowingly departs from the
        published code.

        Only ``"paper-code"`` has any: when the LLM's beginning-of-sequence id is 1 (Llama,
        Mistral), the published code re-scored answers after deleting every id 1 (its padding
        id) from the prompt, so it scored them without the BOS token; this recipe takes the
        log-probs of generation (:attr:`logprob_source`), with the BOS token, and says so.

        >>> recipe_of("paper-code").notes(bos_token_id=1)[0][:40]
        'Log-probs come from generation with the '
        >>> recipe_of("paper-code").notes(bos_token_id=151643)
        []
        >>> recipe_of("default").notes(bos_token_id=1)
        []
        """
        if self.name == "paper-code" and self.logprob_source == "generation" and bos_token_id == 1:
            return [
                "Log-probs come from generation with the prompt's beginning-of-sequence token; "
                "the published code re-scored without it (it deleted every token id 1, its "
                "padding id, which is also this model's BOS), so scores differ slightly from it."
            ]
        return []


_RECIPES: dict[str, Recipe] = {
    "default": Recipe(
        name="default",
        prompt=None,  # Settings.prompt: None = chat template for instruction models
        prompt_trailing_space=False,  # the paper prompt ends with "Answer:"
        stop_strings=None,  # the prompt preset's own: paper "." and newline; chat none
        keep_stop=False,  # the "." that ends an answer is cut, not scored
        banned_strings=(),  # no token is banned
        top_k=None,  # top-k off (transformers top_k=0)
        max_new_tokens=None,  # Settings.max_new_tokens (64 by default)
        logprob_source="generation",  # generation's raw logits, no second forward pass
        alignment_rule="default",
        normalization=None,  # Settings.normalization ("sum" by default)
        nli_input_format="pair",
        nli_dtype="auto",  # float16 on CUDA
        clustering_algorithm="first-member",
        cluster_rule=None,  # Settings.cluster_rule ("strict" by default)
        cluster_by_text=False,
        identical_texts="model",  # as lm-polygraph: the model judges a text against itself
    ),
    "paper-code": Recipe(
        name="paper-code",
        prompt="paper",  # the few-shot prompt, for every model
        prompt_trailing_space=True,  # ends with "Answer: " as published
        stop_strings=(".",),  # "." ends an answer (an end-of-sequence id there) ...
        keep_stop=True,  # ... and stays in its text: scored, shown to the importance model
        banned_strings=(":", "\n"),  # banned tokens (bad_words_ids), not stop strings
        top_k=50,  # the transformers default then
        max_new_tokens=128,
        # The published code re-scores with a second fp16 forward pass after dropping id 1
        # (Llama's BOS): a bug, not copied.
        logprob_source="generation",
        alignment_rule="paper-code",
        normalization="sum",  # Table 1; the medical run's "sum-softmax" is an explicit option
        nli_input_format="paper-code",
        nli_dtype="float32",
        clustering_algorithm="all-pairs",
        cluster_rule="lenient",
        cluster_by_text=True,
        identical_texts="rule",  # it compares distinct texts only: equal texts entail, (1, 0, 0)
    ),
    "truthtorchlm": Recipe(
        name="truthtorchlm",
        prompt=None,
        prompt_trailing_space=False,
        stop_strings=None,
        keep_stop=False,
        banned_strings=(),
        top_k=None,
        max_new_tokens=None,
        logprob_source="generation",
        # TruthTorchLM's token-to-phrase rule is the published code's (whitespace tokens join
        # the phrase before them, phrases sharing a token merged with their mean score)
        alignment_rule="paper-code",
        normalization="softmax",  # softmax(score / 0.1), its MARS default
        nli_input_format="pair",
        nli_dtype="auto",
        clustering_algorithm="first-member",
        cluster_rule="lenient",  # bidirectional_entailment_clustering: no contradiction
        cluster_by_text=False,
        identical_texts="model",  # its clustering asks the model for equal texts too
        softmax_temperature=0.1,
    ),
}


def recipe_of(name: str) -> Recipe:
    """The recipe called ``name`` (one of :data:`~mars_demo.settings.RECIPES`).

    Raises:
        OptionError: an unknown recipe.

    >>> recipe_of("paper-code").clustering_algorithm
    'all-pairs'
    """
    if name not in RECIPES:
        raise OptionError(f"recipe must be one of {', '.join(RECIPES)}; got {name!r}")
    return _RECIPES[name]


def apply_recipe(settings: Settings) -> Settings:
    """``settings`` with the Settings fields its recipe fixes (see :meth:`Recipe.apply`).

    ``"default"`` changes nothing; ``"paper-code"`` sets prompt "paper", max_new_tokens 128,
    cluster_rule "lenient" and normalization "sum"."""
    return recipe_of(settings.recipe).apply(settings)


@dataclass(frozen=True)
class Resolved:
    """The options of one engine call, resolved once when it enters the engine: what was
    ``asked``, the ``settings`` that run (the recipe's fixed fields applied) and the
    ``recipe``."""

    asked: Settings
    settings: Settings
    recipe: Recipe

    def overrides(self, fields: tuple[str, ...] = SETTINGS_FIELDS) -> list[str]:
        """A warning naming the options (of ``fields``) that the recipe set to another value
        than was asked for (none: an empty list)."""
        asked, used = self.asked, self.settings
        changed = [
            f"{name.replace('_', ' ')} {getattr(used, name)} (not {getattr(asked, name)})"
            for name in fields
            if getattr(asked, name) is not None and getattr(asked, name) != getattr(used, name)
        ]
        if not changed:
            return []
        source = {"truthtorchlm": "TruthTorchLM 0.1.19"}.get(used.recipe, "the published code")
        return [f"The {used.recipe} recipe sets {', '.join(changed)}, as {source} does."]


def resolve(settings: Settings) -> Resolved:
    """``settings`` with its recipe: :class:`Resolved`."""
    recipe = recipe_of(settings.recipe)
    return Resolved(asked=settings, settings=recipe.apply(settings), recipe=recipe)

