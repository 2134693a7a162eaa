"""P(True): the LLM judges its own answer (Kadavath et al. 2022, "Language Models (Mostly) Know
What They Know", arXiv 2207.05221).

The LLM reads the question, optionally its own sampled answers ("brainstormed ideas"), and the
proposed answer, and is asked whether the answer is true; the probability it gives to "True" as
the next token is its confidence. One extra forward pass of the LLM, which runs elsewhere; this
module builds the prompt and turns the log-probability into an uncertainty (higher = less
trustworthy).

The prompts are lm-polygraph 0.7's (``lm_polygraph/stat_calculators/prompt.py``,
``PromptCalculator`` and ``SamplingPromptCalculator``), character for character: zero-shot,
without the few-shot examples of the paper. Its ``{q}`` is the full text given to the LLM; here
it is the bare question, as in the paper.
"""

from __future__ import annotations

from . import _validation as check

# lm-polygraph 0.7, PromptCalculator (estimator "PTrue")
PROMPT = (
    "Question: {q}\n Possible answer:{a}\n "
    "Is the possible answer:\n (A) True\n (B) False\n The possible answer is:"
)
# lm-polygraph 0.7, SamplingPromptCalculator (estimator "PTrueSampling"), samples joined by ", "
SAMPLES_PROMPT = (
    "Question: {q}\n Here are some ideas that were brainstormed: {s}\n Possible answer:{a}\n "
    "Is the possible answer:\n (A) True\n (B) False\n The possible answer is:"
)
SAMPLE_SEPARATOR = ", "
# The text whose next-token probability is read: lm-polygraph takes the single token that
# tokenizer("True") gives (special tokens left out). SentencePiece tokenizers (Llama, Mistral)
# spell it with a leading space ("▁True"); byte-level BPE ones (GPT-2, Qwen) without.
TARGET = "True"


def p_true_prompt(question: str, answer: str, sampled_answers=None) -> str:
    """The P(True) prompt for ``answer`` to ``question``, lm-polygraph's exact template.

    Without ``sampled_answers``: :data:`PROMPT`. With them: :data:`SAMPLES_PROMPT`, the samples
    joined by ", " (Kadavath et al. found that showing the model its own samples helps). The
    answer is inserted as given, right after "Possible answer:" (lm-polygraph inserts the
    generated text, which usually starts with a space).

    Example:

    >>> print(p_true_prompt("Capital of France?", " Paris", [" Paris", " Lyon"]))
    Question: Capital of France?
     Here are some ideas that were brainstormed:  Paris,  Lyon
     Possible answer: Paris
     Is the possible answer:
     (A) True
     (B) False
     The possible answer is:
    """
    check.text(question, "question")
    check.text(answer, "answer")
    if sampled_answers is None:
        return PROMPT.format(q=question, a=answer)
    if isinstance(sampled_answers, str):
        raise ValueError(f"sampled_answers must be a sequence of strings, got {sampled_answers!r}")
    samples = [check.text(s, f"sampled_answers[{i}]") for i, s in enumerate(sampled_answers)]
    return SAMPLES_PROMPT.format(q=question, s=SAMPLE_SEPARATOR.join(samples), a=answer)


def p_true(true_logprob) -> float:
    """P(True) uncertainty: ``-log P(True)``, the negated log-probability of :data:`TARGET`.

    ``true_logprob`` is the natural-log probability the LLM gives to the "True" token as the
    next token after :func:`p_true_prompt` (the log-softmax of its raw logits, temperature 1).
    In nats, >= 0; higher = less trustworthy. Same as lm-polygraph's ``PTrue`` and
    ``PTrueSampling``. (TruthTorchLM's ``PTrue`` returns P(true) itself, a confidence, from a
    chat prompt; the reference code of Lin et al. uses 1 - P, with P normalized over the
    "(A" and "(B" tokens; both rank answers the same way as -log P for their own P.)

    Example: P(True) = 0.8 gives -log 0.8.

    >>> import math
    >>> round(p_true(math.log(0.8)), 4)
    0.2231
    """
    return 0.0 - check.log_score(true_logprob, "true_logprob")  # 0.0 - x: no -0.0
