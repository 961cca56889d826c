"""The SSRF guard: which addresses an outbound request may reach when its host is not one the
operator configured (a page from search results, a redirect's target).

Every host is resolved (all A/AAAA records) and refused if any address is loopback, private,
link-local, multicast, unspecified, reserved or a cloud-metadata address, unless the host or a
CIDR holding the address is allowlisted. :class:`GuardedResolver` hands aiohttp only the
addresses the guard vetted, so a second DNS answer (DNS rebinding) can never be used for the
connection. Used by the page fetcher and by every client of ``adapters.http`` that follows a
redirect.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

_PIN_TTL_S = 30.0

METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata"})
METADATA_IPS = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")}
)

_NAT64 = ipaddress.ip_network("64:ff9b::/96")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
GetAddrInfo = Callable[..., Awaitable[list[tuple[Any, ...]]]]


class FetchError(Exception):
    """A page could not be fetched; ``kind`` names why (metrics, logs)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class SsrfError(FetchError):
    """The SSRF guard refused a URL."""

    def __init__(self, message: str):
        super().__init__("ssrf", message)



def refusal_reason(ip: IPAddress) -> str | None:
    """Why the guard refuses ``ip`` (None: a public address). IPv6 forms that embed an IPv4
    address (mapped, 6to4, Teredo, NAT64) are judged by the embedded address too."""
    embedded = _embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    if embedded is not None and (reason := refusal_reason(embedded)):
        return reason
    if ip in METADATA_IPS:
        return "cloud metadata"
    checks = (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
        ("not globally routable", not ip.is_global),
    )
    return next((name for name, hit in checks if hit), None)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


class SsrfGuard:
    """Resolves hosts and refuses non-public addresses unless allowlisted.

    ``allowlist`` entries are host names (``example.org``; ``.example.org`` also matches its
    subdomains) or IP addresses / CIDRs (``127.0.0.1``, ``10.0.0.0/8``)."""

    def __init__(self, allowlist: Iterable[str] = (), *, getaddrinfo: GetAddrInfo | None = None):
        self.hosts: set[str] = set()
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in allowlist:
            entry = entry.strip().lower()
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.hosts.add(entry.rstrip("."))
        self._getaddrinfo = getaddrinfo

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self.hosts or any(h.startswith(".") and host.endswith(h) for h in self.hosts)

    def check_ip(self, ip: IPAddress, host: str | None = None) -> None:
        """Raise :class:`SsrfError` unless ``ip`` is public or allowlisted."""
        if any(ip in net for net in self.networks):
            return
        reason = refusal_reason(ip)
        if reason:
            shown = f"{host} resolves to {ip}, which" if host and host != str(ip) else str(ip)
            raise SsrfError(f"refused to fetch: {shown} is {reason}")

    async def resolve(self, host: str, port: int) -> list[ResolveResult]:
        """All vetted addresses of ``host`` (raises :class:`SsrfError` if any is refused)."""
        host = host.lower().rstrip(".")
        literal = _ip_literal(host)
        allowed_name = self.host_allowed(host)
        if literal is not None:
            if not allowed_name:
                self.check_ip(literal)
            return [_result(host, literal, port)]
        if host in METADATA_HOSTS and not allowed_name:
            raise SsrfError(f"refused to fetch: {host} is a cloud metadata host")
        getaddrinfo = self._getaddrinfo or asyncio.get_running_loop().getaddrinfo
        try:
            infos = await getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise FetchError("dns", f"cannot resolve {host}: {exc}") from exc
        ips = list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))
        if not ips:
            raise FetchError("dns", f"{host} has no addresses")
        if not allowed_name:
            for ip in ips:
                self.check_ip(ip, host)
        return [_result(host, ip, port) for ip in ips]


class GuardedResolver(AbstractResolver):
    """aiohttp resolver that only ever returns addresses the guard vetted.

    :meth:`vet` resolves and vets a host (raising :class:`SsrfError`) and pins the answer for a
    short while; :meth:`resolve` (called by aiohttp when it opens a connection) returns the
    pinned answer, or vets afresh, so the connection goes to a vetted address."""

    def __init__(self, guard: SsrfGuard, pin_ttl_s: float = _PIN_TTL_S):
        self.guard = guard
        self.pin_ttl_s = pin_ttl_s
        self._pins: dict[tuple[str, int], tuple[float, list[ResolveResult]]] = {}

    async def vet(self, host: str, port: int) -> list[ResolveResult]:
        key = (host.lower().rstrip("."), port)
        pinned = self._pins.get(key)
        if pinned and pinned[0] > time.monotonic():
            return pinned[1]
        results = await self.guard.resolve(host, port)
        now = time.monotonic()
        if len(self._pins) > 1024:
            self._pins = {k: v for k, v in self._pins.items() if v[0] > now}
        self._pins[key] = (now + self.pin_ttl_s, results)
        return results

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_UNSPEC) -> list[ResolveResult]:
        results = await self.vet(host, port)
        if family in (socket.AF_INET, socket.AF_INET6):
            results = [r for r in results if r["family"] == family]
        if not results:
            raise OSError(f"no vetted {family!r} address for {host}")
        return results

    async def close(self) -> None:
        self._pins.clear()


def _ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _result(host: str, ip: IPAddress, port: int) -> ResolveResult:
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    return ResolveResult(
        hostname=host, host=str(ip), port=port, family=family, proto=socket.IPPROTO_TCP, flags=socket.AI_NUMERICHOST
    )
