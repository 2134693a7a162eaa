"""What a visitor of a served page may do: public mode, the model switch, BEM, per-visitor limits,
and who a visitor is. Pure policy: no gradio, no web server (those are in
:mod:`mars_demo.ui.limits`).

A page is **public** when anyone but the host can reach it: ``--share`` (a *.gradio.live link), a
``--host`` that is not a loopback address (0.0.0.0, a LAN address...), or a Hugging Face Space
(the ``SPACE_ID`` variable is set). Then:

- nobody can switch or load models: the switch is not on the page and its handler does not exist
  on the server (the host chooses every model with flags or variables);
- each request may ask for at most :attr:`Access.max_sample_tokens` = samples x max new tokens,
  and pasted answers may hold at most as many characters per sample-token allowance
  (:meth:`Access.check_score_work`);
- each client (:class:`ClientIdentity`) holds at most a few places in Gradio's queue: at most
  :attr:`Access.per_client` analyses, :data:`VIEW_PLACES` of any other event, and
  :data:`QUEUE_PLACES` in all (:meth:`Access.places_for`); more are refused at once (HTTP 429).

Everywhere, a visitor may ask only for the uncertainty methods of :attr:`Access.methods` (by
default the free ones, :data:`mars_demo.methods.FREE`: nothing beyond what every analysis
computes), and BEM importance (``importance_method="bem"``) is offered only when the host named its
two models (``--bem`` and ``--chunker``); in public mode they must be local paths, so that no
visitor's request ever starts a download.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mars_demo import texts
from mars_demo.methods import FREE
from mars_demo.options import OptionError

PUBLIC_MAX_SAMPLE_TOKENS = 640  # samples x max new tokens per request, public default (5 x 128)
PUBLIC_PER_CLIENT = 1  # analyses one client may have running or waiting, public default
ENGINE_GROUP = "engine"  # the queue's concurrency group of every event that runs the models
VIEW_PLACES = 2  # places one client may hold of any one other queued event (the Evaluation view...)
QUEUE_PLACES = 4  # places one client may hold in the queue, all events together
# Pasted answers (/score, "Score your own answers"): characters per sample-token of the work cap.
# Every tokenizer the engine runs (byte-level BPE, WordPiece, SentencePiece) makes at most one
# token of a character and averages about four characters a token on English text: a pasted
# sample of 4 x N characters costs about what a generated one of N tokens costs.
CHARS_PER_TOKEN = 4


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an address app.py listens on; None = Gradio's default, 127.0.0.1) is
    reachable only from this machine."""
    if host is None:
        host = "127.0.0.1"
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost: others may resolve it too
        return False


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


# --- who a client is -----------------------------------------------------------------------------


Network = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address of X-Forwarded-For or of the connection: "1.2.3.4", "1.2.3.4:80", "[::1]:80",
    "::1"; None when it is none."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:  # IPv4 with a port
        text = text.split(":", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class ClientIdentity:
    """How a request's client is decided: from what the deployment's proxy adds, never from what
    the client itself sends.

    ``X-Forwarded-For`` is read only when the connection comes from a trusted proxy
    (``proxies``; ``any_peer``: every connection does, as on a Space, where only the Space's
    proxy reaches the app). Its lines are joined in order (two header lines count as one list,
    as RFC 9110 says), and the client is the **rightmost** address that is not itself a trusted
    proxy (with ``public_only``: not a trusted proxy and a public address, so the internal hops of
    a hosting service are passed over). Everything left of it is whatever the client sent, which
    anyone can make up; a proxy appends the address it saw, so the rightmost entries are the
    proxies' own. Otherwise, or when no entry qualifies, the client is the connection's address.

    The four deployments (:meth:`for_deployment`): a bare ``--host`` trusts no proxy; ``--share``
    trusts the tunnel on this machine (loopback) and takes the rightmost public address, the one
    the share server appended; a Space trusts its proxy and takes the rightmost public address;
    behind a reverse proxy the host names it (``--trusted-proxy``, e.g. 127.0.0.1 for nginx on
    the same machine), which must append the client (nginx: ``$proxy_add_x_forwarded_for``)."""

    proxies: tuple[Network, ...] = ()
    any_peer: bool = False
    public_only: bool = False
    name: str = "connection"  # the deployment, for the log line and docs/public-page.md

    @classmethod
    def for_deployment(cls, *, space: bool = False, share: bool = False,
                       trusted_proxies: Iterable[str] = ()) -> ClientIdentity:
        """The identity of a deployment; ``trusted_proxies``: addresses or networks
        ("127.0.0.1", "10.0.0.0/8") of the host's own reverse proxies. Raises ValueError for
        one that is neither."""
        proxies = []
        for text in trusted_proxies:
            try:
                proxies.append(ipaddress.ip_network(text.strip(), strict=False))
            except ValueError as err:
                raise ValueError(texts.ACCESS_BAD_PROXY.format(value=text)) from err
        if space:
            return cls(tuple(proxies), any_peer=True, public_only=True, name="Space proxy")
        if share:
            return cls(tuple(proxies) + LOOPBACK, public_only=True, name="share tunnel")
        if proxies:
            return cls(tuple(proxies), name="reverse proxy")
        return cls()

    def _trusted(self, address: Any) -> bool:
        return address is not None and any(address in net for net in self.proxies
                                           if net.version == address.version)

    def of(self, scope: Mapping[str, Any]) -> str:
        """The client of a request (an ASGI scope): an IP address, as text."""
        client = scope.get("client")
        peer = str(client[0]) if client else "unknown"
        if not (self.any_peer or self._trusted(_address(peer))):
            return peer
        forwarded = [value.decode("latin-1") for key, value in scope.get("headers") or ()
                     if key == b"x-forwarded-for"]
        for entry in reversed(",".join(forwarded).split(",")):
            address = _address(entry)
            if address is None:
                if entry.strip():
                    return entry.strip()[:64]  # a proxy appended something odd: that is the client
                continue
            if self._trusted(address) or (self.public_only and not address.is_global):
                continue
            return str(address)
        return peer


# --- what visitors may do ------------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    """What visitors may do. The defaults are a local page without the model switch.

    ``max_sample_tokens`` / ``per_client``: None = no limit. ``bem``: the host named BEM's models,
    so BEM importance is offered. ``identity``: how a request's client is decided.
    ``model_names``: names the host gave its models for visitors (``--llm-name``...; "llm",
    "importance", "nli" -> name). ``methods``: the uncertainty methods a visitor may ask for
    (the server-side allowed set; the free ones unless the host says otherwise)."""

    public: bool = False
    allow_model_switch: bool = False
    bem: bool = False
    max_sample_tokens: int | None = None
    per_client: int | None = None
    identity: ClientIdentity = ClientIdentity()
    model_names: Mapping[str, str] = field(default_factory=dict)
    methods: frozenset[str] = frozenset(FREE)

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
                )
            )

    def check_score_work(self, samples: list[str]) -> None:
        """Raise :class:`OptionError` when pasted answers would cost more than the heaviest
        question this page allows: the samples x their longest length in characters may be at
        most :data:`CHARS_PER_TOKEN` x ``max_sample_tokens`` (the NLI model compares every pair of
        samples, so the cost grows with both)."""
        if self.max_sample_tokens is None or not samples:
            return
        longest = max(len(text) for text in samples)
        work = len(samples) * longest
        limit = CHARS_PER_TOKEN * self.max_sample_tokens
        if work > limit:
            raise OptionError(texts.ACCESS_TOO_MUCH_PASTED.format(
                samples=len(samples), chars=longest, work=work, limit=limit))

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


def public_access(
    *,
    allow_model_switch: bool = False,
    bem: bool = False,
    max_sample_tokens: int | None = PUBLIC_MAX_SAMPLE_TOKENS,
    per_client: int | None = PUBLIC_PER_CLIENT,
    identity: ClientIdentity = ClientIdentity(),
    model_names: Mapping[str, str] | None = None,
    methods: frozenset[str] = frozenset(FREE),
) -> Access:
    """The access of a public page. ``allow_model_switch`` is refused: nobody switches there.
    ``methods``: those visitors may ask for (the free ones, plus any the host computes)."""
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
