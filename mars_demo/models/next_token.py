"""One next-token log-prob after a text (the LLM contract's ``next_token_logprob``), for the
extra LLM pass of P(True) (:mod:`mars_demo.core.p_true`): in-process from the logits
(:func:`in_process`), through an OpenAI-compatible server from the top log-probs of a one-token
completion (:func:`served`).

The token read is the first token of the target text tokenized alone (special tokens left out),
as lm-polygraph reads the single token of ``tokenizer("True")``; when the target takes several
tokens (tiny test tokenizers do) the first one is read and a warning says so.
"""

from __future__ import annotations

import math

from ..errors import EndpointError, InvalidModelOutput
from . import served_prompt
from .completions import clean_token
from .contract import NextToken

#: Top log-probs asked of a server: vLLM's default limit (``--max-logprobs 20``).
SERVER_TOP_LOGPROBS = 20


def target_token(tokenizer, target: str) -> tuple[int, list[str]]:
    """The id of the first token of ``target`` tokenized alone, and a warning when ``target``
    takes several tokens."""
    ids = list(tokenizer(target, add_special_tokens=False)["input_ids"])
    if not ids:
        raise ValueError(f"the tokenizer gives no token for {target!r}")
    if len(ids) == 1:
        return ids[0], []
    first = tokenizer.decode([ids[0]])
    return ids[0], [
        f"The LLM's tokenizer splits {target!r} into {len(ids)} tokens; the log-prob of the "
        f"first one ({first!r}) was read, as the next token."
    ]


def in_process(llm, text: str, target: str) -> NextToken:
    """:class:`NextToken` of the in-process LLM (:class:`mars_demo.models.llm.LLM`): the log
    softmax of the logits at the last position of ``text`` (tokenized with the tokenizer's
    special tokens), at the target's first token, in float32."""
    import torch

    token_id, warnings = target_token(llm.tokenizer, target)
    ids = list(llm.tokenizer(text)["input_ids"])
    if not ids:
        raise ValueError("the text of an LLM pass has no tokens")
    input_ids = torch.tensor([ids], dtype=torch.long, device=llm.device)
    with torch.inference_mode():
        logits = llm.model(input_ids=input_ids).logits[0, -1].float()
    value = float(torch.log_softmax(logits, dim=-1)[token_id])
    if not math.isfinite(value):
        raise InvalidModelOutput(
            f"The LLM {llm.model_id} produced an invalid log-prob (NaN or infinity) in its "
            "extra pass; load it in full precision (without 4-bit) or pick another model."
        )
    return NextToken(value, llm.tokenizer.decode([token_id]), warnings)


def _token_text(tokenizer, token_id: int) -> str:
    """A token's text as a server names it in its top log-probs: SentencePiece's "▁" is the
    space it stands for (a lone token decoded would lose it)."""
    piece = tokenizer.convert_ids_to_tokens(token_id)
    if isinstance(piece, str) and piece.startswith("\u2581"):
        return piece.replace("\u2581", " ")
    return tokenizer.decode([token_id])


def served(llm, text: str, target: str) -> NextToken:
    """:class:`NextToken` from the server of :class:`mars_demo.models.endpoint.EndpointLLM`: a
    one-token ``/completions`` request at temperature 1, top-p 1 (so even a server that returns
    processed log-probs returns the raw ones) with the top :attr:`~EndpointLLM.top_logprobs`
    log-probs of the next token, among which the target's is looked up: by id where the server
    returns ids (vLLM with the tokenizer known here), else by its text (the tokenizer's text of
    the target token when known here; without it the target text itself). With the tokenizer
    known, the text is sent as the server reads it like the in-process LLM, or the difference
    is in the warnings (:func:`~mars_demo.models.served_prompt.read_prompt`). A target not among
    them gives no log-prob and a warning saying so."""
    tok = llm.tokenizer
    if tok is not None:
        token_id, warnings = target_token(tok, target)
        name = _token_text(tok, token_id)
    else:
        token_id, warnings, name = None, [], target
    top = llm.top_logprobs
    if tok is not None:  # the server reads the text as the in-process LLM does, or says not
        reading = served_prompt.read_prompt(llm, llm.client, text, list(tok(text)["input_ids"]))
        text, warnings = reading.text, warnings + reading.warnings
    body = llm.completion_body(text, max_tokens=1, temperature=1.0, top_p=1.0, seed=0,
                               logprobs=top, **llm._ids_field())
    data = llm._request(llm.client, "POST", "/completions", body, what="run an extra LLM pass")
    try:
        first = data["choices"][0]["logprobs"]["top_logprobs"][0]
        found = [float(v) for k, v in first.items()
                 if (token_id is not None and k == f"token_id:{token_id}")
                 or (clean_token(k) and k == name)]
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise EndpointError(
            f"The LLM server at {llm.base_url} returned no top log-probs for the next token; "
            "P(True) needs the top log-probs of /v1/completions (`logprobs`)."
        ) from None
    if not found:
        return NextToken(None, name, warnings + [
            f"The LLM server at {llm.base_url} did not return the log-prob of the token "
            f"{name!r} among the {top} most probable next tokens it was asked for, so P(True) "
            "has no value here (the token is less probable than all of them); an in-process "
            "LLM reads it exactly."
        ])
    return NextToken(found[0], name, warnings)
