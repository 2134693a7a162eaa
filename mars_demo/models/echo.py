"""Teacher forcing through an OpenAI-compatible server: an answer's token log-probs read from
the prompt log-probs of a ``/completions`` request that echoes prompt + answer (``echo`` with
``logprobs``), which no sampling setting touches; and the probe that says whether a server's
sampled log-probs are raw, or must be re-scored so (:func:`raw_logprobs`).

Used by :class:`mars_demo.models.endpoint.EndpointLLM` to re-score generated answers (when the
server's sampled log-probs are not raw) and to score answers given as text. Both check the server
first, because some servers' echo log-probs are wrong: llama-cpp-python 0.3.36 gives each token
the log-prob of the *next* position.

* generated answers: every token of the greedy answer must be the most probable one at its
  place under the echoed log-probs (one token in three may miss: a re-tokenized answer may split
  a word differently);
* answers given as text: the most probable next token right after the prompt, read from the
  echo, must have the log-prob that a one-token greedy request for the prompt gives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from ..answers import Answer
from ..errors import EndpointError, OptionError
from . import prompts
from .completions import ServerChoice, clean_token, parse_echo, to_answer, token_end
from .server import wait_all

if TYPE_CHECKING:
    from .contract import Prompt

# ``llm`` below is the EndpointLLM (its requests, URL and headers); not imported here, since it
# imports this module.

#: Self-check of echo log-probs: a log-prob read twice (echo, generation) or the greedy token's
#: log-prob against the top one may differ by float noise between two requests.
ECHO_TOLERANCE = 1e-3
#: Probe: log-probs at the requested temperature / top_p and at 1 / 1 agree within this when the
#: server returns raw log-probs (the same forward pass; only float noise between two requests).
#: Processed log-probs at temperature 0.5 differ by about the log-prob itself (several nats).
PROBE_TOLERANCE = 1e-3
JOINED = ("The server's tokenizer joined the end of the prompt and the start of the answer into "
          "one token; that token's log-prob was used for the answer.")


def raw_logprobs(llm, prompt: str, temperature: float, top_p: float, seed: int) -> bool:
    """True when the server's log-probs at (temperature, top_p) are its raw ones: the first
    step's top log-probs of a one-token request at them equal those at temperature 1, top-p 1."""
    tops = []
    for temp, p in ((temperature, top_p), (1.0, 1.0)):
        body = llm.completion_body(prompt, max_tokens=1, temperature=temp, top_p=p, seed=seed,
                                   logprobs=5)
        data = llm._request(llm.client, "POST", "/completions", body,
                            what="check its log-probs")
        try:
            top = data["choices"][0]["logprobs"]["top_logprobs"][0]
            tops.append({str(k): float(v) for k, v in top.items()})
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            return False  # no top log-probs to compare: re-score to be safe
    # Token strings that several tokens share ("" for lone bytes and control tokens) may
    # map to different tokens in the two answers: compare the unambiguous ones only.
    common = {k for k in set(tops[0]) & set(tops[1]) if clean_token(k)}
    if not common:
        return False
    return max(abs(tops[0][k] - tops[1][k]) for k in common) <= PROBE_TOLERANCE


def _broken_echo(llm, why: str) -> EndpointError:
    return EndpointError(
        f"The LLM server at {llm.base_url} returns prompt (echo) log-probs that do not belong to "
        f"their tokens ({why}), so answers cannot be scored by teacher forcing there. "
        "llama-cpp-python's server has this bug; its sampled log-probs are raw, so use logprobs "
        "mode 'server' (or 'auto') with it for generated answers, score answers given as text "
        "with an in-process LLM (--llm without --llm-endpoint), or serve the model with vLLM."
    )


def rescore_generated(llm, client, pool, prompt: str,
                      built: dict[str, tuple[Answer, str]],
                      check: Callable[[], None]) -> dict[str, Answer]:
    """Re-score generated answers (``built``: name -> (answer, its text before stripping)) by
    teacher forcing; "greedy" among them checks the server's echo log-probs."""
    jobs = {
        name: pool.submit(echo_score, llm, client, prompt, gen, raw)
        for name, (gen, raw) in built.items()
    }
    out = wait_all(jobs, check, None)
    greedy_tf, greedy_top = out["greedy"]
    misses = sum(1 for lp, top in zip(greedy_tf.logprobs, greedy_top)
                 if top is not None and lp < top - ECHO_TOLERANCE)
    if misses and misses * 3 > len(greedy_tf.logprobs):
        raise _broken_echo(llm, "the greedy answer's tokens are not the most probable ones "
                                "under them")
    return {name: gen for name, (gen, _) in out.items()}


def score_texts(llm, prompt: "Prompt", answers: Sequence[Answer]) -> list[Answer]:
    """Answers given as text, scored by teacher forcing on the server, each tokenized as the
    model continues the prompt: after a space for the paper prompt ("Answer: Mars"), directly for
    a chat prompt or after a prompt that ends with whitespace (as ``LLM.teacher_forced``)."""
    lead = prompts.continuation(prompt)
    for a in answers:
        if not a.text.strip():
            raise OptionError(f"the answer {a.text!r} has no tokens to score")
    client = llm.client
    body = llm.completion_body(prompt.text, max_tokens=1, temperature=0.0, top_p=1.0,
                               logprobs=1, seed=0)
    data = llm._request(client, "POST", "/completions", body, what="check its log-probs")
    try:
        first = data["choices"][0]["logprobs"]["top_logprobs"][0]
        next_top = max(float(v) for v in first.values())
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise EndpointError(
            f"The LLM server at {llm.base_url} returned no top log-probs; MARS needs the "
            "token log-probs of /v1/completions (`logprobs`)."
        ) from None
    out = []
    for a in answers:
        gen = Answer(text=a.text, token_ids=[], token_texts=[], spans=[], logprobs=None,
                     finish_reason=a.finish_reason, warnings=list(a.warnings))
        scored, tops, at_prompt_end = echo_score(llm, client, prompt.text, gen,
                                                 lead + a.text, with_start=True)
        if at_prompt_end and tops[0] is not None and abs(tops[0] - next_top) > ECHO_TOLERANCE:
            raise _broken_echo(llm, "the most probable token after the prompt has another "
                                    "log-prob in the echo than in a generation")
        # as in-process: the answer's own warnings, and what the scoring adds
        notes = list(a.warnings) + [w for w in scored.warnings if w == JOINED]
        if scored.text != a.text.strip():
            notes.append(f"The LLM's tokenizer reads the given text {a.text!r} as "
                         f"{scored.text!r}; that is what was scored.")
        scored.warnings = notes
        out.append(scored)
    return out


def echo_score(llm, client, prompt: str, gen: Answer, raw: str, *,
               with_start: bool = False):
    """Score one answer by teacher forcing: echo prompt + answer with ``logprobs``; returns
    (the new Answer, the top-1 log-prob at each of its tokens), and with ``with_start`` also
    whether its first token starts right at the prompt's end.

    An empty answer is scored, as in-process, by its stop token: prompt + the stop text."""
    empty = gen.text == "" and gen.finish_reason == "stop" and raw == ""
    scored = gen.token_texts[0] if empty else raw
    if not clean_token(scored):
        raise EndpointError(
            f"The LLM server at {llm.base_url} gave an empty answer that stopped at a token "
            "with no text (end of sequence), which cannot be re-scored by teacher forcing; "
            "use logprobs mode 'server' with a server that returns raw log-probs."
        )
    # the top log-probs at each place give the tokens' entropies (a lower bound, as for a
    # generated answer), which the token-level methods read
    body = llm.completion_body(prompt + scored, max_tokens=1, temperature=0.0, top_p=1.0,
                               logprobs=llm.top_logprobs, echo=True, seed=0)
    data = llm._request(client, "POST", "/completions", body, what="re-score an answer")
    tokens, starts, lps, tops, full = parse_echo(data, llm.base_url, prompt + scored,
                                                 llm.tokenizer)
    start, end = len(prompt), len(prompt) + len(scored)
    idx = [i for i in range(len(tokens))
           if starts[i] < end and token_end(i, starts, tokens, end) > start]
    if not idx or any(lps[i] is None for i in idx):
        raise EndpointError(
            f"The LLM server at {llm.base_url} returned no log-prob for a re-scored answer "
            "token; use a server that supports echo with logprobs (vLLM), logprobs mode "
            "'server' for generated answers, or an in-process LLM (--llm without "
            "--llm-endpoint) for answers given as text."
        )
    warnings = [JOINED] if starts[idx[0]] < start else []
    if empty:
        i = idx[0]
        new = Answer(
            text="", token_ids=[None], token_texts=[scored],  # type: ignore[list-item]
            spans=[(0, 0)], logprobs=[float(lps[i])], finish_reason="stop",
            warnings=warnings + list(gen.warnings),
        )
        result = new, [tops[i]]
    else:
        bounds = [max(starts[i], start) - start for i in idx] + [len(raw)]
        pieces = [raw[bounds[k]:bounds[k + 1]] for k in range(len(idx))]
        answer = ServerChoice(text=raw, pieces=pieces, in_text=len(pieces),
                              logprobs=[float(lps[i]) for i in idx],
                              finish_reason=gen.finish_reason,
                              top_logprobs=[full[i] for i in idx])
        new, _ = to_answer(answer, (), finish=gen.finish_reason, extra_warnings=warnings)
        result = new, [tops[i] for i in idx]
    return (*result, starts[idx[0]] == start) if with_start else result
