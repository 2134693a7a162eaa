"""Recipes: one place for every choice that differs between this project and the paper's code."""

import dataclasses

import pytest

from mars_demo.core.alignment import ALIGNMENT_RULES
from mars_demo.core.clustering import ALGORITHMS, IDENTICAL_TEXTS
from mars_demo.core.scoring import NORMALIZATIONS
from mars_demo.errors import OptionError
from mars_demo.models.nli import DTYPES, INPUT_FORMATS
from mars_demo.recipes import SETTINGS_FIELDS, apply_recipe, recipe_of
from mars_demo.settings import CLUSTER_RULES, PROMPTS, RECIPES, Settings


def choices(name: str) -> dict:
    """Every choice of the recipe called ``name``, by field name."""
    return dataclasses.asdict(recipe_of(name))


def test_recipes_are_default_paper_code_and_truthtorchlm():
    assert RECIPES == ("default", "paper-code", "truthtorchlm")
    assert Settings().recipe == "default"
    assert Settings(recipe="paper-code").to_dict()["recipe"] == "paper-code"
    with pytest.raises(OptionError, match="recipe must be one of default, paper-code, truthtorchlm"):
        Settings(recipe="paper")
    with pytest.raises(OptionError, match="recipe"):
        recipe_of("Paper-Code")


def test_both_recipes_name_the_same_choices():
    default, paper = choices("default"), choices("paper-code")
    assert set(default) == set(paper)
    assert set(SETTINGS_FIELDS) <= set(default)
    assert default["name"] == "default" and paper["name"] == "paper-code"


def test_default_recipe_is_what_every_module_does_by_default():
    c = choices("default")
    assert c["clustering_algorithm"] == ALGORITHMS[0] == "first-member"
    assert c["alignment_rule"] == ALIGNMENT_RULES[0] == "default"
    assert c["nli_input_format"] == INPUT_FORMATS[0] == "pair"
    assert c["nli_dtype"] == DTYPES[0] == "auto"
    assert c["cluster_by_text"] is False
    assert c["identical_texts"] == IDENTICAL_TEXTS[0] == "model"  # as lm-polygraph's matrix
    assert (c["prompt_trailing_space"], c["keep_stop"], c["banned_strings"], c["top_k"]) == (
        False, False, (), None)
    assert c["stop_strings"] is None and c["logprob_source"] == "generation"
    # None: the Settings value stays, so the default recipe changes no setting.
    assert all(c[name] is None for name in SETTINGS_FIELDS)
    s = Settings(max_new_tokens=32, cluster_rule="lenient", normalization="softmax")
    assert apply_recipe(s) == s


def test_paper_code_recipe_lists_the_published_choices():
    c = choices("paper-code")
    assert c == {
        "name": "paper-code",
        "prompt": "paper",
        "prompt_trailing_space": True,
        "stop_strings": (".",),
        "keep_stop": True,
        "banned_strings": (":", "\n"),
        "top_k": 50,
        "max_new_tokens": 128,
        "logprob_source": "generation",
        "alignment_rule": "paper-code",
        "normalization": "sum",
        "nli_input_format": "paper-code",
        "nli_dtype": "float32",
        "clustering_algorithm": "all-pairs",
        "cluster_rule": "lenient",
        "cluster_by_text": True,
        "identical_texts": "rule",
        "softmax_temperature": None,
    }
    assert c["clustering_algorithm"] in ALGORITHMS and c["cluster_rule"] in CLUSTER_RULES
    assert c["alignment_rule"] in ALIGNMENT_RULES and c["normalization"] in NORMALIZATIONS
    assert c["nli_input_format"] in INPUT_FORMATS and c["nli_dtype"] in DTYPES
    assert c["prompt"] in PROMPTS


def test_apply_recipe_sets_the_settings_fields_paper_code_fixes():
    s = apply_recipe(Settings(recipe="paper-code", max_new_tokens=32, cluster_rule="strict",
                              normalization="softmax", samples=3))
    assert (s.prompt, s.max_new_tokens, s.cluster_rule, s.normalization) == (
        "paper", 128, "lenient", "sum")
    assert s.samples == 3 and s.recipe == "paper-code"  # everything else is left alone


def test_a_recipe_cannot_be_changed_by_its_reader():
    recipe = recipe_of("paper-code")
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.top_k = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.banned_strings += ("x",)
    assert recipe_of("paper-code").top_k == 50
    assert recipe_of("paper-code").banned_strings == (":", "\n")


def test_paper_code_warns_about_the_bos_token_it_keeps():
    (note,) = recipe_of("paper-code").notes(bos_token_id=1)
    assert "id 1" in note and "beginning-of-sequence" in note
    assert recipe_of("paper-code").notes(bos_token_id=2) == []
    assert recipe_of("paper-code").notes() == []
    assert recipe_of("default").notes(bos_token_id=1) == []
    with pytest.raises(OptionError):
        recipe_of("other").notes(bos_token_id=1)


def test_the_docs_have_the_point_by_point_table_with_both_recipes():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "paper-code.md").read_text(
        encoding="utf-8")
    header = ("| choice | the paper's text | the published code | the authors' later library "
              "(TruthTorchLM) | this project's `default` | `paper-code` |")
    assert header in page
    table = page.split(header, 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines()[1:] if line.startswith("|")]
    assert all(line.count("|") == 7 for line in rows), [r for r in rows if r.count("|") != 7]
    for choice in ("clustering algorithm", "clustering rule", "NLI input", "whitespace-only token",
                   "phrases sharing one LLM token", "medical run", "undefined results"):
        assert any(row.startswith(f"| {choice}") for row in rows), choice


def test_the_truthtorchlm_recipe_is_its_mars_and_clustering_choices():
    """TruthTorchLM 0.1.19's MARS (softmax(score / 0.1) phrase weights and the published code's
    token-to-phrase rule) and its clustering (first member, lenient); every other choice is
    default's; asked otherwise, it says so."""
    from mars_demo.recipes import resolve

    r = recipe_of("truthtorchlm")
    assert (r.normalization, r.softmax_temperature, r.alignment_rule) == ("softmax", 0.1,
                                                                          "paper-code")
    assert (r.clustering_algorithm, r.cluster_rule) == ("first-member", "lenient")
    default = recipe_of("default")
    same = {"prompt", "stop_strings", "keep_stop", "banned_strings", "top_k", "max_new_tokens",
            "nli_input_format", "clustering_algorithm", "cluster_by_text"}
    assert all(getattr(r, k) == getattr(default, k) for k in same)
    run = resolve(Settings(recipe="truthtorchlm", normalization="sum", softmax_temperature=0.5))
    assert (run.settings.normalization, run.settings.softmax_temperature) == ("softmax", 0.1)
    assert run.settings.cluster_rule == "lenient"
    assert run.overrides() == ["The truthtorchlm recipe sets cluster rule lenient (not strict), "
                               "normalization softmax (not sum), softmax temperature 0.1 (not "
                               "0.5), as TruthTorchLM 0.1.19 does."]
