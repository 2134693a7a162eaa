"""Who a visitor of a served page is, and how much of something shared each one may use: the
client of a request (:class:`ClientIdentity`, from what the deployment's proxy adds, an IPv6
client by its /64 and its /48), a per-client allowance refilled over time (:class:`Allowance`),
and the names a page answers to (:func:`host_name`, :func:`hosts_of`, :func:`web_origin`). Pure
policy, as :mod:`mars_demo.hosting.access` that sets the limits: no gradio, no web server.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mars_demo import texts
from mars_demo.options import SERVER

IPV6_PREFIX = SERVER["ipv6_prefix"].default  # an IPv6 client is its /64: one subscriber's share
#: an IPv6 client's wider network: the /64s of one /48 share a second tier of queue places
NETWORK_PREFIX = 48


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



# --- who a client is -----------------------------------------------------------------------------


Network = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address of X-Forwarded-For or of the connection: "1.2.3.4", "1.2.3.4:80", "[::1]:80",
    "::1" (an IPv4 address written as IPv6, "::ffff:1.2.3.4", is the IPv4 one); None when it is
    none."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:  # IPv4 with a port
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if address.version == 6 and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # a server listening on "::" sees IPv4 clients so
    return address


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
    ipv6_prefix: int = IPV6_PREFIX  # an IPv6 client is its network of this length (see key)

    @classmethod
    def for_deployment(cls, *, space: bool = False, share: bool = False,
                       trusted_proxies: Iterable[str] = (),
                       ipv6_prefix: int = IPV6_PREFIX) -> ClientIdentity:
        """The identity of a deployment; ``trusted_proxies``: addresses or networks
        ("127.0.0.1", "10.0.0.0/8") of the host's own reverse proxies. Raises ValueError for
        one that is neither. ``ipv6_prefix``: see :meth:`key`."""
        if not 0 <= ipv6_prefix <= 128:
            raise ValueError(f"ipv6_prefix must be from 0 to 128; got {ipv6_prefix}")
        return dataclasses.replace(
            cls._deployment(space, share, trusted_proxies), ipv6_prefix=ipv6_prefix)

    @classmethod
    def _deployment(cls, space: bool, share: bool, trusted_proxies: Iterable[str]
                    ) -> ClientIdentity:
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

    def key(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
        """Who ``address`` is, as text: an IPv4 address itself; an IPv6 address its network of
        :attr:`ipv6_prefix` bits ("2001:db8:1:2::/64"), since one subscriber holds a whole /64
        (18 quintillion addresses) and could otherwise be a new client per request; an IPv4
        address written as IPv6 (``::ffff:1.2.3.4``) the IPv4 address.

        >>> ClientIdentity().key(ipaddress.ip_address("2001:db8:1:2:aaaa::7"))
        '2001:db8:1:2::/64'
        >>> ClientIdentity(ipv6_prefix=56).key(ipaddress.ip_address("2001:db8:1:2ff::7"))
        '2001:db8:1:200::/56'
        """
        if address.version == 6:
            if address.ipv4_mapped is not None:
                return str(address.ipv4_mapped)
            if self.ipv6_prefix < 128:
                return str(ipaddress.ip_network(f"{address}/{self.ipv6_prefix}", strict=False))
        return str(address)

    @staticmethod
    def network(client: str) -> str | None:
        """The second tier of a client (:meth:`key`): an IPv6 client's /48 network
        (:data:`NETWORK_PREFIX`; one allocation of a tunnel broker holds 65,536 /64s), whose
        /64s together hold only a few more queue places than one; None for an IPv4 client, and
        for an IPv6 one counted by a network of 48 bits or fewer already.

        >>> ClientIdentity.network("2001:db8:1:2::/64")
        '2001:db8:1::/48'
        >>> ClientIdentity.network("81.2.69.1") is None, ClientIdentity.network("2001:db8::/32")
        (True, None)
        """
        try:
            net = ipaddress.ip_network(client, strict=False)
        except ValueError:
            return None
        if net.version != 6 or net.prefixlen <= NETWORK_PREFIX:
            return None
        return str(net.supernet(new_prefix=NETWORK_PREFIX))

    def connection_key(self, peer: str) -> str | None:
        """Who holds a connection from ``peer`` (its address), for a per-connection limit; None
        when the connection is the deployment's proxy, whose connections carry every client's
        requests (then the proxy in front must limit connections)."""
        address = _address(peer)
        if address is None:
            return peer
        if self.any_peer or self._trusted(address):
            return None
        return self.key(address)

    def of(self, scope: Mapping[str, Any]) -> str:
        """The client of a request (an ASGI scope): an IPv4 address or an IPv6 network
        (:meth:`key`), as text."""
        client = scope.get("client")
        peer = str(client[0]) if client else "unknown"
        peer_address = _address(peer)
        if not (self.any_peer or self._trusted(peer_address)):
            return self.key(peer_address) if peer_address is not None else peer
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
            return self.key(address)
        return self.key(peer_address) if peer_address is not None else peer


# --- how much a client may ask for over time ----------------------------------------------------


class Allowance:
    """What each client may still spend, refilled over time (a token bucket per client): ``rate``
    units a second, at most ``burst`` ahead.

    :meth:`take` spends ``cost`` when the client has that much (else refuses: False);
    :meth:`charge` spends what something turned out to cost, which may leave the client owing,
    and :meth:`allows` refuses until that is paid back. ``now``: a monotonic clock's seconds.
    Thread-safe. Clients whose allowance is full again are forgotten once more than
    ``max_clients`` are tracked.

    >>> allowance = Allowance(rate=1.0, burst=2.0)
    >>> [allowance.take("a", 1.0, now=0.0) for _ in range(3)], allowance.take("b", 1.0, now=0.0)
    ([True, True, False], True)
    >>> allowance.charge("a", 3.0, now=1.0)  # at 1.0: 1 back, 3 spent, 2 owed
    >>> allowance.allows("a", now=2.5), allowance.allows("a", now=3.5)
    (False, True)
    """

    def __init__(self, rate: float, burst: float, max_clients: int = 10_000) -> None:
        self.rate, self.burst, self.max_clients = rate, burst, max_clients
        self._state: dict[str, tuple[float, float]] = {}  # client -> (level, when)
        self._lock = threading.Lock()

    def _level(self, client: str, now: float) -> float:
        level, when = self._state.get(client, (self.burst, now))
        return min(self.burst, level + max(0.0, now - when) * self.rate)

    def allows(self, client: str, now: float) -> bool:
        """Whether ``client`` owes nothing now."""
        with self._lock:
            return self._level(client, now) > 0

    def take(self, client: str, cost: float, now: float) -> bool:
        """Spend ``cost`` of ``client``'s allowance if it has that much; whether it had."""
        with self._lock:
            level = self._level(client, now)
            if level < cost:
                return False
            self._set(client, level - cost, now)
            return True

    def charge(self, client: str, cost: float, now: float) -> None:
        """Spend ``cost`` of ``client``'s allowance, owing what it does not have."""
        with self._lock:
            self._set(client, self._level(client, now) - cost, now)

    def _set(self, client: str, level: float, now: float) -> None:
        self._state[client] = (level, now)
        if len(self._state) > self.max_clients:
            self._state = {c: (lv, t) for c, (lv, t) in self._state.items()
                           if min(self.burst, lv + (now - t) * self.rate) < self.burst}


# --- which names the page answers to -------------------------------------------------------------


def host_name(text: str) -> str | None:
    """The host of a ``Host`` header (or ``X-Forwarded-Host`` entry): its name in lower case, or
    its address, without the port; None when it is neither.

    >>> host_name("Mars.Example.org:7860"), host_name("[::1]:80"), host_name("evil example")
    ('mars.example.org', '::1', None)
    """
    text = text.strip()
    if text.startswith("["):
        address, _, rest = text[1:].partition("]")
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        return address.lower() if is_address(address) else None
    name, _, port = text.partition(":")
    if port and not port.isdigit():
        return None
    name = name.rstrip(".").lower()
    if not name or not all(part and len(part) <= 63 and part.replace("-", "").isalnum()
                           for part in name.split(".")):
        return None
    return name


def is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def hosts_of(values: Iterable[str]) -> tuple[str, ...]:
    """Host names of ``--public-host`` values, web origins (``--allowed-origins``) or the
    address the page listens on, each once, in order; raises ValueError for one that is none.

    >>> hosts_of(["mars.example.org", "https://Friend.example:8443", "0.0.0.0"])
    ('mars.example.org', 'friend.example', '0.0.0.0')
    """
    from urllib.parse import urlsplit

    found: list[str] = []
    for value in values:
        text = value.strip()
        name = urlsplit(text).hostname if "://" in text else host_name(text)
        if name is None and is_address(text.strip("[]")):
            name = text.strip("[]").lower()
        if not name:
            raise ValueError(texts.ACCESS_BAD_HOST.format(value=value))
        if name not in found:
            found.append(name)
    return tuple(found)


def web_origin(text: str) -> str:
    """A web origin as browsers send it in ``Origin``: "scheme://host[:port]", lower case,
    without the scheme's default port. Raises ValueError for anything else (a path, no scheme).

    >>> web_origin("HTTPS://Example.org:443")
    'https://example.org'
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        parts, port = None, None
    if (parts is None or parts.scheme not in ("http", "https") or not parts.hostname
            or parts.path not in ("", "/") or parts.query or parts.fragment or parts.username):
        raise ValueError(f"{text!r} is not a web origin (scheme://host[:port], e.g. "
                         "https://example.org)")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    default = {"http": 80, "https": 443}[parts.scheme]
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "")
