"""The LLM's part of an analysis: prompts, one :class:`~mars_demo.models.contract.GenerationRequest`
built from the settings and the recipe, the answer sets made from what the LLM returns, and the
teacher-forced pass that fills in the log-probs of answers given as text alone.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

from ..answers import AnswerSet, WorkCap
from ..errors import OptionError
from ..methods import METHODS
from ..models import backends, prompts, registry, toy
from ..models.contract import GenerationRequest, GenerationResult, LanguageModel, Prompt
from ..progress import Progress
from ..recipes import Resolved
from ..settings import GENERATION_FIELDS

#: Getting the models faster than this (they were loaded already) is not recorded as "load".
LOAD_SHOWN_S = 0.05


#: top alternatives kept per greedy token when CCP is asked for (the token itself first;
#: lm-polygraph's default of 10)
ALTERNATIVES = 10


def request_for(run: Resolved, preset: str) -> GenerationRequest:
    """What to generate for a prompt of ``preset`` under ``run``'s settings and recipe."""
    s, recipe = run.settings, run.recipe
    return GenerationRequest(
        samples=s.samples,
        temperature=s.temperature,
        top_p=s.top_p,
        max_new_tokens=s.max_new_tokens,
        seed=s.seed,
        top_k=recipe.top_k or 0,  # 0: no top-k
        stop_strings=prompts.stop_strings(preset, recipe),
        keep_stop=recipe.keep_stop,
        banned_strings=tuple(recipe.banned_strings),
        alternatives=ALTERNATIVES if any(
            "greedy_alternatives" in METHODS[m].needs for m in s.method_ids) else 0,
    )


def generate_one(llm: Callable[[], LanguageModel], question: str, run: Resolved,
                 progress: Progress, check: Callable[[], None],
                 on_text: Callable[[str], None] | None,
                 should_stop: Callable[[], bool] | None,
                 messages: list[dict[str, str]] | None = None) -> AnswerSet:
    """The greedy answer and the samples of one (cleaned) question; ``llm()`` gives the LLM
    (loading it when needed; the seconds that takes are recorded as "load"). ``messages``: the
    chat messages the question came with, the question last (:func:`chat_prompt`)."""
    timings: dict[str, float] = {}
    check()  # cancelled while it waited for the models
    t = time.perf_counter()
    model = llm()
    if time.perf_counter() - t > LOAD_SHOWN_S:
        timings["load"] = time.perf_counter() - t
    check()
    progress("generate", 0.0)
    prompt = chat_prompt(model, question, run, messages)
    warnings = list(prompt.warnings) + _notes(model, run)
    result = model.generate(prompt, request_for(run, prompt.preset), on_text=on_text,
                            should_stop=should_stop)
    progress("generate", 1.0)
    timings.update(result.timings_s)
    made = answer_set(model, run, question, prompt, result, warnings, timings)
    return dataclasses.replace(made, messages=messages) if messages else made


def chat_prompt(model: LanguageModel, question: str, run: Resolved,
                messages: list[dict[str, str]] | None) -> Prompt:
    """The prompt of ``question``; with ``messages`` (a system prompt, earlier turns, the
    question last) the chat prompt renders them all. They need the chat prompt: asked with the
    paper prompt they are refused (``OptionError``); a model without a chat template gets the
    paper prompt, which holds the question alone, and the warning says what was left out."""
    context = list(messages[:-1]) if messages else []
    if context and run.settings.prompt == "paper":
        raise OptionError("chat messages need the chat prompt; the paper prompt holds the "
                          "question alone (leave prompt unset or give prompt=\"chat\")")
    prompt = model.build_prompt(question, run.settings.prompt, run.recipe, context=context)
    if context and prompt.preset != "chat":
        prompt.warnings.append(
            f"The paper's few-shot prompt holds the question alone: the {len(context)} "
            "message(s) before it (a system prompt, earlier turns) were left out.")
    return prompt


def generate_many(llm: Callable[[], LanguageModel], questions: list[str], run: Resolved,
                  progress: Progress, check: Callable[[], None],
                  should_stop: Callable[[], bool] | None) -> list[AnswerSet]:
    """:func:`generate_one` for several questions in one ``generate_many`` call of the LLM; the
    load seconds are shared equally among the questions."""
    check()
    t = time.perf_counter()
    model = llm()
    loaded = time.perf_counter() - t
    check()
    progress("generate", 0.0)
    built = [model.build_prompt(q, run.settings.prompt, run.recipe) for q in questions]
    notes = _notes(model, run)
    presets = {p.preset for p in built}
    if len(presets) > 1:  # cannot happen: one LLM, one preset option
        raise OptionError(f"the questions got different prompt presets: {sorted(presets)}")
    request = request_for(run, built[0].preset)
    if backends.backend_for(run.settings).capabilities.batching:
        results = model.generate_many(built, request, should_stop=should_stop)
    else:  # a backend that runs one question at a time
        results = [model.generate(p, request, should_stop=should_stop) for p in built]
    progress("generate", 1.0)
    sets = []
    for question, prompt, result in zip(questions, built, results):
        timings = dict(result.timings_s)
        if loaded > LOAD_SHOWN_S:
            timings["load"] = loaded / len(questions)
        sets.append(answer_set(model, run, question, prompt, result,
                               list(prompt.warnings) + notes, timings))
    return sets


def _notes(model: LanguageModel, run: Resolved) -> list[str]:
    """The LLM's own warnings (how it was loaded), then the recipe's for it: options it
    changed, departures it knows of."""
    return (list(model.notes) + run.overrides()
            + run.recipe.notes(bos_token_id=model.bos_token_id))


def answer_set(model: LanguageModel, run: Resolved, question: str, prompt: Prompt,
               result: GenerationResult, warnings: list[str],
               timings: dict[str, float]) -> AnswerSet:
    """The answer set of one generation, with what made it (the generation options, the LLM,
    the recipe) recorded."""
    s = run.settings
    return AnswerSet(
        question=question,
        greedy=result.greedy,
        samples=result.samples,
        prompt=prompt.text,
        prompt_token_ids=list(prompt.token_ids),
        prompt_preset=prompt.preset,
        logprob_source=result.logprob_source,
        warnings=list(warnings),
        generation={
            **{name: getattr(s, name) for name in GENERATION_FIELDS},
            "prompt": prompt.preset,
            "llm": model.model_id,
            "load_in_4bit": model.quantized,
            "quantization": model.quantization,
            "decoding": model.decoding,
            "llm_endpoint": s.llm_endpoint,
            "llm_backend": backends.backend_for(s).name,
            "device": "cuda" if registry.cuda_available() else "cpu",
            "recipe": s.recipe,
            **({"toy_llm": True} if toy.is_toy(model) else {}),
        },
        timings_s=timings,
    )


def teacher_force(answers: AnswerSet, model: LanguageModel, run: Resolved,
                  cap: WorkCap | None = None) -> tuple[AnswerSet, str, str]:
    """Fill in the log-probs of answers given as text alone with a teacher-forced pass of
    ``model``. Returns the completed set, the warning saying so, and the log-prob source.

    With ``cap`` the pass runs only when it costs no more than that, counted in the LLM's tokens
    (:func:`check_cap`). A backend that cannot teacher-force is refused (``OptionError``)."""
    missing = [i for i, a in enumerate(answers.answers) if not a.has_logprobs]
    backend = backends.backend_for(run.settings)
    if not backend.capabilities.teacher_forcing:
        raise OptionError(
            f"{', '.join(answers.names[i] for i in missing)}: no log-probs were given, and the "
            f"LLM's {backend.name} backend cannot compute them (no teacher forcing): give them, "
            "or score the answers with a backend that can (--llm-backend)")
    preset = run.settings.prompt or answers.prompt_preset
    built = model.build_prompt(answers.question, preset, run.recipe, context=answers.context)
    prompt, note_extra = built, ""
    if answers.prompt_token_ids:
        prompt = Prompt(answers.prompt or built.text, list(answers.prompt_token_ids),
                        built.preset, built.warnings)
    elif answers.prompt is not None and answers.prompt != built.text:
        note_extra = (
            " The given prompt text was not used (give prompt_token_ids to use it): the "
            f"log-probs follow the {built.preset} prompt built from the question."
        )
    if cap is not None:
        check_cap(cap, model, prompt, answers, missing)
    forced = model.teacher_forced(prompt, [answers.answers[i] for i in missing])
    done = list(answers.answers)
    for i, answer in zip(missing, forced):
        done[i] = answer
    who = ", ".join(answers.names[i] for i in missing)
    note = (
        f"{who}: no log-probs were given, so they were computed by a teacher-forced pass of "
        f"{model.model_id} over the answer's text after the {built.preset} prompt." + note_extra
    )
    source = "teacher-forced" if len(missing) == len(done) else (
        f"{answers.logprob_source}+teacher-forced")
    completed = dataclasses.replace(
        answers, greedy=done[0], samples=done[1:], prompt=prompt.text,
        prompt_token_ids=list(prompt.token_ids), prompt_preset=built.preset,
        warnings=list(answers.warnings) + [n for n in model.notes if n not in answers.warnings]
        + list(built.warnings),
        generation={**(answers.generation or {}), "llm": answers.generation.get("llm")
                    if answers.generation else None, "prompt": built.preset},
    )
    return completed, note, source


def check_cap(cap: WorkCap, model: LanguageModel, prompt: Prompt, answers: AnswerSet,
              missing: list[int]) -> None:
    """Refuse (``OptionError`` saying which limit and by how much) a teacher-forced pass over
    ``answers`` (its answers ``missing`` log-probs are read) that costs more than ``cap``, in the
    LLM's tokens: the samples x the longest answer, the main one included (one given with its
    tokens counts them), and the prompt's tokens. A server's LLM whose tokenizer is not known
    here (``--llm`` not naming it) is checked in characters only, before (the page's
    :meth:`~mars_demo.hosting.access.Access.check_score_work`)."""
    if model.tokenizer is None:
        return
    lengths = [len(a.token_texts) for a in answers.answers]
    encoded = prompts.answer_ids(model.tokenizer, prompt, [answers.answers[i] for i in missing])
    for i, ids in zip(missing, encoded):
        lengths[i] = len(ids)
    cap.check(samples=len(answers.samples), longest=max(lengths), prompt=len(prompt.token_ids))
