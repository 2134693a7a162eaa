"""Prompts, shared by both LLM adapters: the paper's few-shot prompt and the chat prompt, which
preset a model gets by default, the stop strings of each preset, and the control tokens a
question must not smuggle into a prompt.

The tokenizer is passed in (a Hugging Face tokenizer); nothing here imports transformers.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from ..recipes import Recipe
    from ..settings import LLMPreset

PAPER_PROMPT = (
    "Answer these questions:\n"
    "Question: What is the capital city of Australia?\n"
    "Answer: The capital city of Australia is Canberra.\n"
    'Question: Who painted the famous artwork "Starry Night"?\n'
    'Answer: "Starry Night" was painted by Vincent van Gogh.\n'
    "Question: {question}?\n"
    "Answer:"
)
PAPER_STOP_STRINGS = (".", "\n")  # the paper ends answers at "." and newline
CHAT_SYSTEM = "Answer the question briefly, in one short sentence."
# Generic control-token shapes ("<|im_end|>", "<s>", "</s>") refused in questions when no local
# tokenizer tells the exact ones: a server would read them as control tokens.
CONTROL_RE = re.compile(r"<\|[^<>|\s]{1,40}\|>|</?s>")


def paper_question(question: str) -> str:
    """The question as the paper prompt holds it: trailing spaces and "?" dropped (the prompt
    adds its own "?")."""
    return question.rstrip().rstrip("?")


def paper_prompt(question: str, recipe: "Recipe") -> str:
    """The paper's few-shot prompt for ``question``; it ends with "Answer:", or "Answer: " when
    the recipe says so (``prompt_trailing_space``, as the published code did).

    >>> from mars_demo.recipes import recipe_of
    >>> paper_prompt("Red planet?", recipe_of("paper-code")).splitlines()[-2:]
    ['Question: Red planet?', 'Answer: ']
    """
    prompt = PAPER_PROMPT.format(question=paper_question(question))
    return prompt + " " if recipe.prompt_trailing_space else prompt


def paper_question_span(question: str) -> tuple[int, int]:
    """Where :func:`paper_question` of ``question`` lies in the paper prompt's text."""
    start = PAPER_PROMPT.index("{question}")
    return start, start + len(paper_question(question))


def continuation(prompt: Any) -> str:
    """What comes between a prompt (a :class:`~mars_demo.models.contract.Prompt`) and an answer
    given as text, so that the answer is tokenized as the model continues the prompt: a space
    after the paper prompt ("Answer: Mars"), nothing after a chat prompt or after a prompt that
    ends with whitespace."""
    if prompt.text[-1:].isspace():
        return ""
    return " " if prompt.preset == "paper" else ""


def answer_ids(tokenizer: Any, prompt: Any, answers: Any) -> list[list[int]]:
    """Each answer's text (``answers``: :class:`~mars_demo.answers.Answer` objects) tokenized as
    the model continues ``prompt`` (:func:`continuation`), special tokens left out: what a
    teacher-forced pass reads. An answer without tokens raises ``OptionError``."""
    from ..errors import OptionError

    lead = continuation(prompt)
    encoded = [list(tokenizer(lead + a.text, add_special_tokens=False)["input_ids"])
               for a in answers]
    for a, ids in zip(answers, encoded):
        if not ids:
            raise OptionError(f"the answer {a.text!r} has no tokens to score")
    return encoded


def chat_messages(question: str, context: Sequence[dict[str, str]] = ()) -> list[dict[str, str]]:
    """The chat prompt's messages: a short system instruction, then the question; with
    ``context`` (the caller's messages before the question: a system prompt, earlier turns)
    those instead of the instruction."""
    head = list(context) or [{"role": "system", "content": CHAT_SYSTEM}]
    return [*head, {"role": "user", "content": question}]


def render_chat(tokenizer: Any, question: str, context: Sequence[dict[str, str]] = ()) -> str:
    """The chat prompt's text, rendered by the tokenizer's chat template."""
    return tokenizer.apply_chat_template(
        chat_messages(question, context), tokenize=False, add_generation_prompt=True
    )


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def default_preset(llm_preset: "LLMPreset | None", chat_template: bool) -> str:
    """The prompt preset a model gets when none is asked for: "chat" for a model with a chat
    template unless its preset says it is no instruction model, else "paper"."""
    if llm_preset is not None and not llm_preset.instruct:
        return "paper"
    return "chat" if chat_template else "paper"


def build_text(question: str, preset: str | None, recipe: "Recipe | None", tokenizer: Any,
               llm_preset: "LLMPreset | None", no_template: str,
               context: Sequence[dict[str, str]] = ()) -> tuple[str, str, list[str]]:
    """The preset used, the text and the warnings of the prompt for ``question``, as every LLM
    builds it: ``preset`` "paper", "chat" or None (the model's default,
    :func:`default_preset`); the paper prompt ends as the ``recipe`` says (the default recipe's
    when None), the chat prompt is the ``tokenizer``'s chat template's, with ``context`` (the
    chat messages before the question; the paper prompt holds the question alone); a chat
    prompt asked for without a chat template (none known: ``tokenizer`` None) is the paper
    prompt, with the warning ``no_template``."""
    from ..recipes import recipe_of

    template = has_chat_template(tokenizer)
    preset = preset or default_preset(llm_preset, template)
    warnings: list[str] = []
    if preset == "chat" and not template:
        warnings.append(no_template)
        preset = "paper"
    if preset == "paper":
        return preset, paper_prompt(question, recipe or recipe_of("default")), warnings
    return preset, render_chat(tokenizer, question, context), warnings


def encode(tokenizer: Any, prompt: str, question: str, span: tuple[int, int] | None,
           add_special_tokens: bool, model_id: str,
           context: Sequence[dict[str, str]] = ()) -> list[int]:
    """Token ids of the ``prompt`` built for ``question``, the question's text always read as
    plain text (``span``: where it lies in the prompt; None for a chat prompt, found here, the
    prompt rendered with ``context``, the messages before the question).

    A question that contains a control token's text (say "<|im_end|>") must not end the
    user's turn or the prompt: such tokens inside the question are encoded as ordinary
    characters; everything else is tokenized exactly as the whole prompt would be. Raises
    ``OptionError`` where that cannot be done (a slow tokenizer, the question not found).
    """
    from ..errors import OptionError

    tok = tokenizer
    controls = controls_in(question, tok)
    if not controls:
        return list(tok(prompt, add_special_tokens=add_special_tokens)["input_ids"])
    if span is None:  # chat: find the question's place by rendering a marker in its stead
        marker = "\x00MARS-QUESTION\x00"
        parts = render_chat(tok, marker, context).split(marker)
        if len(parts) == 2 and parts[0] + question + parts[1] == prompt:
            span = (len(parts[0]), len(parts[0]) + len(question))
        elif prompt.count(question) == 1:
            span = (prompt.index(question), prompt.index(question) + len(question))
    if span is None or not getattr(tok, "is_fast", False):
        raise OptionError(
            f"the question contains {controls[0]!r}, a control token of {model_id}; "
            "remove it from the question"
        )
    a, b = span
    enc = tok(prompt, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
    special_ids = set(tok.convert_tokens_to_ids(control_texts(tok)))
    ids: list[int] = []
    for tid, (start, end) in zip(enc["input_ids"], enc["offset_mapping"]):
        if tid in special_ids and a <= start < end <= b:
            ids += tok(prompt[start:end], add_special_tokens=False,
                       split_special_tokens=True)["input_ids"]
        else:
            ids.append(tid)
    return ids


def in_process(question: str, preset: str | None, recipe: "Recipe | None", tokenizer: Any,
               llm_preset: "LLMPreset | None", model_id: str, no_template: str,
               context: Sequence[dict[str, str]] = ()) -> tuple[str, str, list[int], list[str]]:
    """The preset used, the text, the token ids and the warnings of the prompt for ``question``
    as an in-process LLM reads it (the transformers and llama.cpp backends): the text of
    :func:`build_text`, its ids of :func:`encode` (the paper prompt with the tokenizer's special
    tokens in front, the chat template writing its own)."""
    preset, text, warnings = build_text(question, preset, recipe, tokenizer, llm_preset,
                                        no_template, context)
    if preset == "paper":
        ids = encode(tokenizer, text, paper_question(question), paper_question_span(question),
                     True, model_id)
    else:
        ids = encode(tokenizer, text, question, None, False, model_id, context)
    return preset, text, ids, warnings


def stop_strings(preset: str, recipe: "Recipe") -> tuple[str, ...]:
    """The strings that end an answer: the recipe's own when it names them, else the preset's
    (paper: "." and newline; chat: none); never one of the recipe's banned strings.

    >>> from mars_demo.recipes import recipe_of
    >>> stop_strings("paper", recipe_of("default")), stop_strings("paper", recipe_of("paper-code"))
    (('.', '\\n'), ('.',))
    """
    own = recipe.stop_strings
    if own is None:
        own = PAPER_STOP_STRINGS if preset == "paper" else ()
    banned = {b for b in recipe.banned_strings if b}
    return tuple(s for s in own if s not in banned)


def control_texts(tokenizer: Any) -> list[str]:
    """Texts of the tokenizer's special (control) tokens, e.g. "<|im_end|>"."""
    texts = {str(t) for t in tokenizer.all_special_tokens if t}
    for added in getattr(tokenizer, "added_tokens_decoder", {}).values():
        if getattr(added, "special", False):
            texts.add(str(added))
    return sorted(t for t in texts if t)


def controls_in(question: str, tokenizer: Any | None) -> list[str]:
    """The control-token texts inside ``question``: the tokenizer's own when it is known,
    else the generic shapes of :data:`CONTROL_RE`."""
    if tokenizer is None:
        return CONTROL_RE.findall(question)
    return [t for t in control_texts(tokenizer) if t in question]

