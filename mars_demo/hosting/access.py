"""What a visitor of a served page may do: public mode, the model switch, BEM, per-visitor limits,
and how a visitor is told apart (:mod:`mars_demo.hosting.clients`). Pure policy: no gradio, no web
server (those are in :mod:`mars_demo.ui.guards.limits`).

A page is **public** when anyone but the host can reach it: ``--share`` (a *.gradio.live link),
a ``--host`` that is not a loopback address (0.0.0.0, a LAN address...), or a Hugging Face Space
(the ``SPACE_ID`` variable is set). Then:

- nobody can switch or load models: the switch is not on the page and its handler does not exist
  on the server (the host chooses every model with flags or variables);
- each request may ask for at most :attr:`Access.max_sample_tokens` = samples x max new tokens,
  and pasted answers may cost as much: the samples x the longest answer (the main one included)
  in characters (:meth:`Access.check_score_work`) and, once the LLM's tokenizer has read them,
  in tokens, with at most :attr:`Access.max_prompt_tokens` prompt tokens
  (:attr:`Access.work_cap`, which the teacher-forced pass checks);
- each client (:class:`~mars_demo.hosting.clients.ClientIdentity`; an IPv6 client is its /64 network)
  holds at most a few places in Gradio's queue: at most :attr:`Access.per_client` analyses,
  :data:`VIEW_PLACES` of any other event, and :data:`QUEUE_PLACES` in all
  (:meth:`Access.places_for`), and the /64s of one IPv6 /48 together a few more
  (:meth:`Access.network_places_for`); more are refused at once (HTTP 429);
- every queued event that does not run the models shares one concurrency group,
  :data:`VIEW_GROUP`, which runs one event at a time, and one client may keep it busy for at
  most :attr:`Access.view_share` of the time (:class:`~mars_demo.hosting.clients.Allowance`); requests
  outside the queue (the page's quick checks) come at most :attr:`Access.direct_rate` a second
  per client;
- a connection must send its headers, and then its body, in time, and one client holds a few
  connections (:attr:`Access.header_timeout`, :attr:`Access.body_timeout`,
  :attr:`Access.connections_per_client`); a request must name a host of the page
  (:attr:`Access.hosts`), and only the page's own web pages, and those the host names, may call
  it from a browser (:attr:`Access.allowed_origins`). The web server enforces them
  (:mod:`mars_demo.ui.guards.connections`, :mod:`mars_demo.ui.guards.origins`).

Everywhere, a visitor may ask only for the uncertainty methods of :attr:`Access.methods` (by
default the free ones, :data:`mars_demo.methods.FREE`: nothing beyond what every analysis
computes), and BEM importance (``importance_method="bem"``) is offered only when the host named
its two models (``--bem`` and ``--chunker``); in public mode they must be local paths, so that
no visitor's request ever starts a download.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mars_demo import texts
from mars_demo.answers import AnswerSet, WorkCap
from mars_demo.hosting.clients import ClientIdentity, hosts_of, is_address, is_loopback
from mars_demo.methods import FREE
from mars_demo.options import SERVER, OptionError

PUBLIC_MAX_SAMPLE_TOKENS = 640  # samples x max new tokens per request, public default (5 x 128)
PUBLIC_PER_CLIENT = 1  # analyses one client may have running or waiting, public default
# Tokens of the prompt pasted answers continue (their prompt_token_ids, or the prompt built from
# their question): a page question (at most 1,000 characters) in the few-shot prompt stays well
# under it with every tokenizer the engine runs.
PUBLIC_MAX_PROMPT_TOKENS = 2048
ENGINE_GROUP = "engine"  # the queue's concurrency group of every event that runs the models
VIEW_PLACES = 2  # places one client may hold of any one other queued event (the Evaluation view...)
QUEUE_PLACES = 4  # places one client may hold in the queue, all events together
# The /64s of one IPv6 /48 (clients.NETWORK_PREFIX: one allocation of a tunnel broker or a
# provider, 65,536 /64s) hold together at most this many places more than one /64 does (in a
# group and in all).
NETWORK_EXTRA_PLACES = 1  # ... in one concurrency group
NETWORK_EXTRA_QUEUE = 2  # ... in all
# Every queued event that does not run the models (the scoring toggle's re-render, the banner,
# the Evaluation view's "Show") shares this concurrency group, which runs one event at a time.
VIEW_GROUP = "view"
VIEW_SHARE = 0.25  # seconds of the view group's worker one client may use per second, on average
VIEW_BURST_S = 4.0  # ... and at most this many seconds of it ahead (a first "Show" of a big run)
VIEW_MIN_COST_S = 0.2  # what any view event costs at least (so a flood of cheap ones is bounded)
MIN_BODY_RATE = 8 * 1024  # bytes a second a request's body must average once it is past its
# body timeout (1 MB, the largest upload, within the timeout + 2 minutes)
DIRECT_RATE = 5.0  # requests outside the queue (the page's quick checks) per client and second
DIRECT_BURST = 20.0  # ... and at most this many at once
# Pasted answers (/score, "Score your own answers"): characters per sample-token of the work cap.
# Every tokenizer the engine runs (byte-level BPE, WordPiece, SentencePiece) makes at most one
# token of a character and averages about four characters a token on English text: a pasted
# sample of 4 x N characters costs about what a generated one of N tokens costs.
CHARS_PER_TOKEN = 4


def public_reasons(host: str | None, share: bool, env: Mapping[str, str]) -> list[str]:
    """Why a page is public (empty: it is not): "--share", "--host X", "SPACE_ID"."""
    reasons = []
    if share:
        reasons.append("--share")
    if host is None:  # Gradio listens where GRADIO_SERVER_NAME says (a Space sets 0.0.0.0)
        host = env.get("GRADIO_SERVER_NAME") or None
    if not is_loopback(host):
        reasons.append(f"--host {host}")
    if env.get("SPACE_ID"):
        reasons.append("SPACE_ID")
    return reasons


# --- what visitors may do ------------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    """What visitors may do. The defaults are a local page without the model switch.

    ``max_sample_tokens`` / ``per_client``: None = no limit. ``max_prompt_tokens``: the most
    tokens of the prompt pasted answers continue (None: no limit). ``bem``: the host named BEM's
    models, so BEM importance is offered. ``identity``: how a request's client is decided.
    ``model_names``: names the host gave its models for visitors (``--llm-name``...; "llm",
    "importance", "nli" -> name). ``methods``: the uncertainty methods a visitor may ask for
    (the server-side allowed set; the free ones unless the host says otherwise).
    ``header_timeout`` / ``connections_per_client``: seconds a connection may take to send a
    request's headers, connections one client may hold open (None: no limit; see
    :mod:`mars_demo.ui.guards.connections`). ``body_timeout``: seconds a request's body may pause (and,
    at :data:`MIN_BODY_RATE`, take beyond that). ``allowed_origins``: web origins other than the
    page's own whose pages may call this one from a browser (a public page allows none by
    default). ``hosts``: the host names a public page answers to besides a Space's and its share
    link's (:meth:`knows_host`). ``view_share``: the share of the view group's time one client
    may use (:data:`VIEW_SHARE`); ``direct_rate``: requests outside the queue per client and
    second (None: no limit)."""

    public: bool = False
    allow_model_switch: bool = False
    bem: bool = False
    max_sample_tokens: int | None = None
    per_client: int | None = None
    identity: ClientIdentity = ClientIdentity()
    model_names: Mapping[str, str] = field(default_factory=dict)
    methods: frozenset[str] = frozenset(FREE)
    max_prompt_tokens: int | None = None
    header_timeout: float | None = None
    connections_per_client: int | None = None
    allowed_origins: tuple[str, ...] = ()
    body_timeout: float | None = None
    hosts: tuple[str, ...] = ()
    view_share: float | None = None
    direct_rate: float | None = None

    def knows_host(self, name: str | None, also: Iterable[str] = ()) -> bool:
        """Whether a request naming host ``name`` (:func:`host_name`) is for this page: one of
        :attr:`hosts` or ``also`` (a Space's, the share link's), ``localhost``, or an address
        (no one can point an address elsewhere, as a foreign name can be pointed at the page's
        address: DNS rebinding)."""
        if name is None:
            return False
        return name == "localhost" or is_address(name) or name in self.hosts or name in also

    def check_models(self, settings: Any) -> None:
        """Raise :class:`OptionError` when ``settings`` need models the host did not set up,
        or methods this page does not offer (:attr:`methods`)."""
        if settings.importance_method == "bem" and not self.bem:
            raise OptionError(texts.ACCESS_NO_BEM)
        asked = settings.method_ids
        refused = [m for m in asked if m not in self.methods]
        if refused:
            offered = [m for m in FREE if m in self.methods] + sorted(self.methods - set(FREE))
            raise OptionError(texts.ACCESS_METHODS_NOT_OFFERED.format(
                methods=", ".join(refused), offered=", ".join(offered) or "none"))

    def check_work(self, settings: Any) -> None:
        """Raise :class:`OptionError` when a question asks for more generated tokens
        (samples x max new tokens) than this page allows."""
        if self.max_sample_tokens is None:
            return
        from mars_demo.recipes import apply_recipe

        settings = apply_recipe(settings)  # a recipe may fix max_new_tokens (paper-code: 128)
        work = settings.samples * settings.max_new_tokens
        if work > self.max_sample_tokens:
            raise OptionError(
                texts.ACCESS_TOO_MUCH.format(
                    samples=settings.samples,
                    tokens=settings.max_new_tokens,
                    work=work,
                    limit=self.max_sample_tokens,
                    over=work - self.max_sample_tokens,
                )
            )

    def check_score_work(self, answers: AnswerSet) -> None:
        """Raise :class:`OptionError` saying which limit and by how much when pasted answers
        would cost more than the heaviest question this page allows: the samples x the longest
        answer (the main answer included) in characters may be at most :data:`CHARS_PER_TOKEN` x
        ``max_sample_tokens`` (the NLI model compares every pair of samples, and the LLM's
        teacher-forced pass reads every answer, so the cost grows with both), and the prompt they
        continue at most ``max_prompt_tokens`` ids (its text as many characters per token). The
        same is checked in the LLM's tokens once its tokenizer has read them
        (:attr:`work_cap`)."""
        ids, prompt = answers.prompt_token_ids or [], answers.prompt or ""
        if self.max_prompt_tokens is not None:
            for size, unit, limit in ((len(ids), "token ids", self.max_prompt_tokens),
                                      (len(prompt), "characters",
                                       CHARS_PER_TOKEN * self.max_prompt_tokens)):
                if size > limit:
                    raise OptionError(texts.ACCESS_PROMPT_TOO_LONG.format(
                        size=size, unit=unit, limit=limit, over=size - limit))
        if self.max_sample_tokens is None or not answers.samples:
            return
        longest = max(len(answer.text) for answer in answers.answers)
        work = len(answers.samples) * longest
        limit = CHARS_PER_TOKEN * self.max_sample_tokens
        if work > limit:
            raise OptionError(texts.ACCESS_TOO_MUCH_PASTED.format(
                samples=len(answers.samples), chars=longest, work=work, limit=limit,
                over=work - limit))

    @property
    def work_cap(self) -> WorkCap | None:
        """The cap the engine checks in the LLM's tokens before a teacher-forced pass (None:
        none)."""
        if self.max_sample_tokens is None and self.max_prompt_tokens is None:
            return None
        return WorkCap(self.max_sample_tokens, self.max_prompt_tokens)

    def client_of(self, scope: Mapping[str, Any]) -> str:
        """The client a request (an ASGI scope) comes from (:class:`ClientIdentity`)."""
        return self.identity.of(scope)

    def places_for(self, group: str) -> int | None:
        """The queue places one client may hold of events of concurrency group ``group``
        (None: no limit, a page that is not public or has ``per_client`` off)."""
        if self.per_client is None:
            return None
        return self.per_client if group == ENGINE_GROUP else VIEW_PLACES

    @property
    def queue_places(self) -> int | None:
        """The queue places one client may hold in all (None: no limit)."""
        return None if self.per_client is None else max(QUEUE_PLACES, self.per_client + 1)

    def network_places_for(self, group: str) -> int | None:
        """The places the clients of one network (:meth:`ClientIdentity.network`, an IPv6 /48)
        may hold together of group ``group``: a few more than one client's."""
        places = self.places_for(group)
        return None if places is None else places + NETWORK_EXTRA_PLACES

    @property
    def network_queue_places(self) -> int | None:
        """The places the clients of one network may hold together in all."""
        places = self.queue_places
        return None if places is None else places + NETWORK_EXTRA_QUEUE


def public_access(
    *,
    allow_model_switch: bool = False,
    bem: bool = False,
    max_sample_tokens: int | None = PUBLIC_MAX_SAMPLE_TOKENS,
    per_client: int | None = PUBLIC_PER_CLIENT,
    identity: ClientIdentity = ClientIdentity(),
    model_names: Mapping[str, str] | None = None,
    methods: frozenset[str] = frozenset(FREE),
    max_prompt_tokens: int | None = PUBLIC_MAX_PROMPT_TOKENS,
    header_timeout: float | None = SERVER["header_timeout"].default,
    connections_per_client: int | None = SERVER["connections_per_client"].default,
    allowed_origins: Iterable[str] | None = (),
    body_timeout: float | None = SERVER["body_timeout"].default,
    hosts: Iterable[str] = (),
    view_share: float | None = VIEW_SHARE,
    direct_rate: float | None = DIRECT_RATE,
) -> Access:
    """The access of a public page. ``allow_model_switch`` is refused: nobody switches there.
    ``methods``: those visitors may ask for (the free ones, plus any the host computes). The
    connection limits' defaults are those of :data:`mars_demo.options.SERVER_OPTIONS`."""
    if allow_model_switch:
        raise ValueError(texts.ACCESS_SWITCH_PUBLIC)
    return Access(
        public=True,
        allow_model_switch=False,
        bem=bem,
        max_sample_tokens=max_sample_tokens or None,
        per_client=per_client or None,
        identity=identity,
        model_names=dict(model_names or {}),
        methods=frozenset(methods),
        max_prompt_tokens=max_prompt_tokens or None,
        header_timeout=header_timeout or None,
        connections_per_client=connections_per_client or None,
        allowed_origins=tuple(allowed_origins or ()),
        body_timeout=body_timeout or None,
        hosts=hosts_of([*hosts, *(allowed_origins or ())]),
        view_share=view_share or None,
        direct_rate=direct_rate or None,
    )


def check_bem_models(bem: str | None, chunker: str | None, public: bool) -> bool:
    """Whether BEM is offered: both models named. On a public page they must be local paths
    (a Hub id would be downloaded when the first visitor picks BEM). Raises ValueError."""
    given = [name for name, value in (("--bem", bem), ("--chunker", chunker)) if value]
    if not given:
        return False
    if len(given) == 1:
        raise ValueError(texts.ACCESS_BEM_BOTH)
    if public:
        for flag, value in (("--bem", bem), ("--chunker", chunker)):
            if not os.path.exists(os.path.expanduser(value)):
                raise ValueError(texts.ACCESS_BEM_LOCAL.format(flag=flag, value=value))
    return True
