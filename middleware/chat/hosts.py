"""Which ``Host`` (and websocket ``Origin``) the proxy answers: ``server.allowed_hosts``.

A page on ``http://evil.example`` whose name the attacker re-points at 127.0.0.1 (DNS
rebinding) reaches a proxy on loopback with ``Host: evil.example``, and its websocket with
``Origin: http://evil.example``: the same origin as far as Host can tell. Only the names the
server is meant to be reached by are accepted: a foreign Host is refused before any work, and
a websocket's Origin must name an allowed host (on the port the client connected to), never
merely match the request's own Host.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from aiohttp import web

from middleware.settings import ServerSettings

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_ALL_INTERFACES = ("", "0.0.0.0", "::")


class AllowedHosts:
    """Host names and addresses (no ports): exact, ``.example.org`` with its subdomains, ``*``
    any; ``any_local``: every IP address literal and every single-label name too (a server
    on all interfaces is reached by any of its addresses, by its machine's name and, in a
    container, by its service's name: ``proxy:8000`` for Prometheus. A rebinding page
    needs a name the attacker's DNS answers, which has a dot; a single-label name is
    resolved by the client's own hosts file and search domains)."""

    def __init__(self, names: Iterable[str], any_local: bool = False) -> None:
        cleaned = {name.strip().lower().strip("[]").rstrip(".") for name in names if name.strip()}
        self.any_host = "*" in cleaned
        self.suffixes = tuple(name for name in cleaned if name.startswith("."))
        self.names = frozenset(name for name in cleaned if not name.startswith("."))
        self.any_local = any_local

    @classmethod
    def for_server(cls, server: ServerSettings) -> AllowedHosts:
        """``server.allowed_hosts``, or by default the address it listens on and loopback's
        names (on all interfaces: any address literal and any single-label name)."""
        if server.allowed_hosts:
            return cls(server.allowed_hosts)
        if server.host in _ALL_INTERFACES:
            return cls(LOOPBACK_NAMES, any_local=True)
        return cls([*LOOPBACK_NAMES, server.host])

    def allows(self, host: str) -> bool:
        """Whether ``host`` (a name or an address, no port) is one of the allowed."""
        host = host.lower().strip("[]").rstrip(".")
        if self.any_host or host in self.names or any(host.endswith(s) or host == s[1:] for s in self.suffixes):
            return True
        return self.any_local and ("." not in host or _is_address(host))

    def allows_header(self, value: str | None) -> bool:
        """Whether a ``Host`` header names an allowed host (no header: not a browser, allowed)."""
        if value is None:
            return True
        authority = split_authority(value)
        return authority is not None and self.allows(authority[0])

    def allows_origin(self, origin: str, host_header: str | None) -> bool:
        """Whether a browser page at ``origin`` may use the websocket: its host is allowed and
        its port is the one the client connected to (``host_header``'s)."""
        try:
            parts = urlsplit(origin)
            port = parts.port
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.hostname or not self.allows(parts.hostname):
            return False
        authority = split_authority(host_header or "")
        return authority is not None and authority[1] == port


def split_authority(value: str) -> tuple[str, int | None] | None:
    """``host[:port]`` (``[v6]:port`` too) as its host and port; None when malformed."""
    value = value.strip()
    host, port = value, ""
    if value.startswith("["):
        host, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port = rest[1:]
    elif value.count(":") == 1:
        host, _, port = value.partition(":")
    if not host:
        return None
    if not port:
        return host, None
    return (host, int(port)) if port.isdigit() and int(port) < 65536 else None


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


ALLOWED_HOSTS_KEY = web.AppKey("allowed_hosts", AllowedHosts)
