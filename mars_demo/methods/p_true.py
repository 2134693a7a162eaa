"""P(True) (Kadavath et al. 2022): the LLM asked, in one extra pass, whether its answer is true.
Math: :mod:`mars_demo.core.p_true`; the pass: :mod:`mars_demo.engine.stages.llm_pass`, which
asks the LLM for the log-prob of "True" after :func:`llm_pass_prompt` and saves it in the
analysis (``method_inputs[id]``)."""

from __future__ import annotations

from typing import Sequence

from .base import method

_KADAVATH = "Kadavath et al. 2022"


def _p_true(method_id: str):
    def compute(x, _):
        from ..core import p_true

        return p_true.p_true(x.saved[method_id]["logprob"])
    return compute


def llm_pass_prompt(method_id: str, question: str, answer: str,
                    samples: Sequence[str]) -> str:
    """The text the extra LLM pass of ``method_id`` reads; the log-prob of the next token
    :data:`mars_demo.core.p_true.TARGET` after it is what the method turns into a value.

    ``p_true`` is lm-polygraph's ``PTrue`` prompt (question and answer alone);
    ``p_true_sampling`` its ``PTrueSampling`` prompt, which first shows the sampled answers as
    brainstormed ideas (as Kadavath et al. do), joined by ", ". The answer is the greedy one,
    put after a space (the template has none after "Possible answer:"; the generated text
    lm-polygraph inserts starts with one); the samples follow the template's own space.

    >>> print(llm_pass_prompt("p_true", "Capital of France?", "Paris", ["Paris", "Lyon"]))
    Question: Capital of France?
     Possible answer: Paris
     Is the possible answer:
     (A) True
     (B) False
     The possible answer is:
    """
    from ..core.p_true import p_true_prompt

    if method_id == "p_true":
        return p_true_prompt(question, " " + answer)
    if method_id == "p_true_sampling":
        return p_true_prompt(question, " " + answer, list(samples))
    raise ValueError(f"{method_id!r} runs no extra LLM pass")


METHODS = (
    method("p_true", "P(True)",
           "how little the LLM itself believes its answer is true, asked in one extra pass",
           ["llm_pass"], False, _KADAVATH, _p_true("p_true"), "estimators/p_true.py"),
    method("p_true_sampling", "P(True), with samples",
           "as P(True), the LLM shown its own sampled answers as brainstormed ideas first",
           ["samples", "llm_pass"], False, _KADAVATH, _p_true("p_true_sampling"),
           "estimators/p_true_sampling.py"),
)
