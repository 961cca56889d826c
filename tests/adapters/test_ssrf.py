"""The SSRF guard on its own (``adapters.ssrf``): each refused address class, a host refused if any
of its addresses is, metadata host names refused without a lookup, the allowlist by CIDR and by
host name, and the resolver that gives aiohttp only vetted addresses of the asked family."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

from adapters.ssrf import FetchError, GuardedResolver, SsrfError, SsrfGuard, refusal_reason


pytestmark = pytest.mark.usefixtures("loopback_only")  # tests/adapters/conftest.py


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.10.20", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.251", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("100.64.0.1", "not globally routable"),
        ("2002:a00:1::", "private"),  # 6to4 wrapping 10.0.0.1
    ],
)
async def test_guard_refuses_each_non_public_class(address: str, reason: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address)) == reason
    with pytest.raises(SsrfError, match=reason):
        await SsrfGuard().resolve(address, 80)


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"])
async def test_guard_accepts_public_addresses(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address)) is None
    [result] = await SsrfGuard().resolve(address, 443)
    assert result["host"] == address and result["port"] == 443


def fake_dns(table: dict[str, list[str]], calls: list[str] | None = None):
    async def getaddrinfo(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        if calls is not None:
            calls.append(host)
        answers = table.get(host)
        if answers is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if callable(answers):
            answers = answers()
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers
        ]

    return getaddrinfo


async def test_guard_refuses_a_host_if_any_address_is_private() -> None:
    guard = SsrfGuard(getaddrinfo=fake_dns({"mixed.test": ["93.184.216.34", "10.0.0.8"], "public.test": ["8.8.4.4"]}))
    with pytest.raises(SsrfError, match="mixed.test resolves to 10.0.0.8, which is private"):
        await guard.resolve("mixed.test", 80)
    assert [r["host"] for r in await guard.resolve("public.test", 80)] == ["8.8.4.4"]
    with pytest.raises(FetchError) as info:
        await guard.resolve("nowhere.test", 80)
    assert info.value.kind == "dns" and not isinstance(info.value, SsrfError)


async def test_guard_refuses_metadata_host_names_without_resolving() -> None:
    calls: list[str] = []
    guard = SsrfGuard(getaddrinfo=fake_dns({}, calls))
    for host in ("metadata.google.internal", "METADATA.google.internal."):
        with pytest.raises(SsrfError, match="metadata"):
            await guard.resolve(host, 80)
    assert calls == []


async def test_allowlist_by_cidr_and_by_host_name() -> None:
    dns = fake_dns({"intranet.corp": ["10.1.1.1"], "wiki.intranet.corp": ["10.1.1.2"], "other.corp": ["10.1.1.3"]})
    guard = SsrfGuard(["192.168.0.0/16", "intranet.corp", ".intranet.corp", "fd00::/8"], getaddrinfo=dns)
    assert await guard.resolve("192.168.4.4", 80)
    assert await guard.resolve("fd00:ec2::254", 80)  # explicitly allowlisted CIDR wins
    assert await guard.resolve("intranet.corp", 80)
    assert await guard.resolve("wiki.intranet.corp", 80)
    for refused in ("10.0.0.1", "other.corp", "corp"):
        with pytest.raises((SsrfError, FetchError)):
            await guard.resolve(refused, 80)


async def test_guarded_resolver_filters_by_family() -> None:
    resolver = GuardedResolver(SsrfGuard(getaddrinfo=fake_dns({"dual.test": ["8.8.8.8", "2001:4860:4860::8888"]})))
    assert [r["host"] for r in await resolver.resolve("dual.test", 80, socket.AF_INET6)] == ["2001:4860:4860::8888"]
    assert len(await resolver.resolve("dual.test", 80)) == 2
