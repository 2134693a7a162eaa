"""How an OpenAI-compatible server reads a prompt, held against the local tokenizer's reading
before anything is generated, so that the server never reads another prompt silently.

The in-process LLM reads a prompt as its tokenizer's ids (:meth:`~mars_demo.models.llm.LLM.
build_prompt`: the chat template's text with its special tokens, no BOS added; the paper prompt
with the BOS the tokenizer adds). A server tokenizes the text itself and puts its own BOS in
front when *its* tokenizer says so, which need not be what the local tokenizer says: a GGUF file
may say ``add_bos_token = false`` where a converted Hugging Face tokenizer adds one, and vLLM adds
the BOS of a tokenizer that adds one to a chat prompt that already starts with it. So the server
is asked how it tokenizes the text (vLLM's ``POST /tokenize``, llama-cpp-python's ``POST
/extras/tokenize``, both beside ``/v1``) and the text sent is the one it reads as the local ids:

* the text itself when the server reads the local ids from it;
* without its leading BOS text when the server adds a BOS of its own;
* with the BOS text in front when the local ids start with a BOS that the server does not add.

When none of these reads as the local ids (another tokenizer, another BOS), the text itself is
sent, the server's reading is recorded as the prompt's ids, and a warning says how the two
readings differ. A server with neither tokenize route is checked by the number of prompt tokens
its ``usage`` reports for a one-token completion of each candidate (a check by count only, which
two readings of the same length pass; the recorded ids are then the local ones); one that
reports no usage either is used as it is, with a warning that the prompt could not be checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import EndpointError

#: the tokenize routes tried, beside the ``/v1`` of the server's URL, with their request body
ROUTES = (("/tokenize", "prompt"),  # vLLM: {"model", "prompt"} -> {"tokens": [...], ...}
          ("/extras/tokenize", "input"))  # llama-cpp-python: {"input"} -> {"tokens": [...]}
NO_ROUTE = ""


@dataclass
class Reading:
    """A prompt as the server reads it: the ``text`` to send, the ``token_ids`` the server
    reads from it (empty when it told nothing but a count) and ``warnings`` when that is not
    what the local tokenizer reads."""

    text: str
    token_ids: list[int]
    warnings: list[str] = field(default_factory=list)


def candidates(text: str, local_ids: list[int], tokenizer: Any) -> list[str]:
    """The texts that may read as ``local_ids`` on a server: ``text``, then without its BOS
    text (a server that adds its own) or with it in front (a server that adds none).

    >>> class Tok: bos_token, bos_token_id = "<s>", 1
    >>> candidates("<s>Hi", [1, 7], Tok()), candidates("Hi", [1, 7], Tok())
    (['<s>Hi', 'Hi'], ['Hi', '<s>Hi'])
    """
    bos, bos_id = getattr(tokenizer, "bos_token", None), getattr(tokenizer, "bos_token_id", None)
    out = [text]
    if bos and text.startswith(bos):
        out.append(text[len(bos):])
    elif bos and bos_id is not None and local_ids[:1] == [bos_id]:
        out.append(bos + text)
    return out


def read_prompt(llm, client, text: str, local_ids: list[int]) -> Reading:
    """The text to send for a prompt whose local reading is ``local_ids``, and what the server
    reads from it (see the module doc). ``llm``: the
    :class:`~mars_demo.models.endpoint.EndpointLLM` (its URL, headers, tokenizer)."""
    texts = candidates(text, local_ids, llm.tokenizer)
    first = tokenized(llm, client, texts[0])
    if first is None:
        return _by_count(llm, client, texts, local_ids)
    if first == local_ids:
        return Reading(texts[0], list(first))
    for candidate in texts[1:]:
        if tokenized(llm, client, candidate) == local_ids:
            return Reading(candidate, list(local_ids))
    return Reading(text, list(first), [differs(llm, first, local_ids)])


def differs(llm, served: list[int], local: list[int]) -> str:
    """The warning for a server that reads a prompt as ``served`` where the local tokenizer
    reads ``local``."""
    at = next((i for i, (a, b) in enumerate(zip(served, local)) if a != b),
              min(len(served), len(local)))
    tok = llm.tokenizer

    def shown(ids: list[int]) -> str:
        if not ids[at:]:
            return "its end"
        return repr(tok.decode(ids[at:at + 3], skip_special_tokens=False))

    return (f"The LLM server at {llm.base_url} reads this prompt as {len(served)} tokens where "
            f"the tokenizer given with --llm ({llm.tokenizer_id}) reads {len(local)}; they first "
            f"differ at token {at} ({shown(served)} on the server, {shown(local)} here). The "
            "answers follow the server's reading, whose ids are recorded; give the served "
            "model's own tokenizer (its folder, Hub id or GGUF file) with --llm.")


def tokenized(llm, client, text: str) -> list[int] | None:
    """The server's token ids of ``text`` (as its completions read a prompt), or None when it
    has no tokenize route (found once per client of a server, then remembered)."""
    route = llm.tokenize_route
    routes = ROUTES if route is None else [r for r in ROUTES if r[0] == route]
    for path, key in routes:
        ids = _tokenize(llm, client, path, {"model": llm.model, key: text})
        if ids is not None:
            llm.tokenize_route = path
            return ids
    llm.tokenize_route = NO_ROUTE
    return None


def _root(base_url: str) -> str:
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


def _tokenize(llm, client, path: str, body: dict) -> list[int] | None:
    """The ids a tokenize route answers, None when the route is not there (any status but
    200, or an answer without a list of ids); a server that cannot be reached is an error."""
    import httpx

    try:
        resp = client.post(_root(llm.base_url) + path, json=body, headers=llm._headers())
    except httpx.HTTPError as err:
        raise EndpointError(
            f"Cannot reach the LLM server at {llm.base_url} to tokenize the prompt "
            f"({type(err).__name__}); check that it is running, or fix --llm-endpoint."
        ) from None
    if resp.status_code != 200:
        return None
    try:
        ids = resp.json()["tokens"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                            for i in ids):
        return None
    return list(ids)


def _by_count(llm, client, texts: list[str], local_ids: list[int]) -> Reading:
    """The check of a server without tokenize routes: its ``usage.prompt_tokens``."""
    counts = []
    for candidate in texts:
        n = prompt_tokens(llm, client, candidate)
        if n is None:
            return Reading(texts[0], list(local_ids), [
                f"The LLM server at {llm.base_url} says neither how it tokenizes a prompt "
                "(no /tokenize route) nor how many prompt tokens it read (no usage), so this "
                "prompt's tokens could not be checked against the tokenizer given with --llm; "
                "the recorded prompt ids are that tokenizer's."])
        if n == len(local_ids):
            return Reading(candidate, list(local_ids))
        counts.append(n)
    return Reading(texts[0], [], [
        f"The LLM server at {llm.base_url} reads this prompt as {counts[0]} tokens where the "
        f"tokenizer given with --llm ({llm.tokenizer_id}) reads {len(local_ids)}; it has no "
        "tokenize route to say which, so no prompt ids are recorded. Give the served model's "
        "own tokenizer (its folder, Hub id or GGUF file) with --llm."])


def prompt_tokens(llm, client, text: str) -> int | None:
    """``usage.prompt_tokens`` of a one-token greedy completion of ``text``, None when the
    server reports none."""
    body = llm.completion_body(text, max_tokens=1, temperature=0.0, top_p=1.0, seed=0)
    data = llm._request(client, "POST", "/completions", body, what="count the prompt's tokens")
    try:
        n = data["usage"]["prompt_tokens"]
    except (KeyError, TypeError):
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) else None
