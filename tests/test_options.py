"""Bad options are refused by the settings and the library with a message naming what is allowed;
unknown option names and LLM presets too.
"""

from __future__ import annotations

import pytest
from forced_answers import QUESTION

import mars_demo
from mars_demo.errors import ModelLoadError, OptionError
from mars_demo.settings import Settings

BAD_OPTIONS = [
    ({"samples": 0}, "samples must be an integer from 1 to 20"),
    ({"samples": 1000}, "samples must be an integer from 1 to 20"),
    ({"samples": 2.5}, "samples must be an integer from 1 to 20"),
    ({"temperature": -1}, "temperature must be a number from 0.05 to 2.0"),
    ({"temperature": float("nan")}, "temperature must be a number from 0.05 to 2.0"),
    ({"top_p": 0}, "top_p must be a number from 0.05 to 1.0"),
    ({"max_new_tokens": 0}, "max_new_tokens must be an integer from 1 to 512"),
    ({"max_new_tokens": 10_000}, "max_new_tokens must be an integer from 1 to 512"),
    ({"seed": -1}, "seed must be an integer from 0"),
    ({"softmax_temperature": 0}, "softmax_temperature must be a number from"),
    ({"prompt": "fewshot"}, "prompt must be one of paper, chat"),
    ({"importance_method": "magic"}, "importance_method must be one of model, token, bem"),
    ({"normalization": "max"}, "normalization must be one of sum, softmax"),
    ({"distribution": "median"}, "distribution must be one of equal, max, min"),
    ({"cluster_rule": "loose"}, "cluster_rule must be one of strict, lenient"),
    ({"load_in_4bit": "yes"}, "load_in_4bit must be true, false or None"),
    ({"llm": "  "}, "llm must be a Hub id, a local directory, a GGUF file or a preset"),
    ({"importance": ""}, "importance must be a Hub id or a local directory"),
]


@pytest.mark.parametrize("option, message", BAD_OPTIONS)
def test_bad_options_are_refused_by_settings_and_library(option, message, tiny_settings):
    with pytest.raises(OptionError, match=message):
        Settings(**option)
    with pytest.raises(OptionError, match=message):
        tiny_settings.replace(**option)
    opts = {**tiny_settings.to_dict(), **option}
    with pytest.raises(OptionError, match=message):
        mars_demo.analyze(QUESTION, **opts)


def test_unknown_option_names_are_refused(tiny_settings):
    with pytest.raises(OptionError, match="unknown option.*temprature.*known: .*temperature"):
        mars_demo.analyze(QUESTION, temprature=0.5, **tiny_settings.to_dict())


def test_unknown_llm_preset_names_the_presets():
    with pytest.raises(ModelLoadError) as info:
        mars_demo.analyze(QUESTION, llm="llama-2-7", samples=1)
    msg = str(info.value)
    assert "the LLM llama-2-7 (--llm: not in the Hugging Face cache, and no LLM preset (" in msg
    assert "llama-2-7b" in msg and "cpu-small" in msg
    assert "\n" not in msg
