"""Fixtures of the outbound-client tests (the page fetcher and every other client)."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Safety net: if a guard ever let a request through, it must not leave the machine."""
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and not ipaddress.ip_address(address[0].split("%")[0]).is_loopback:
            raise AssertionError(f"test attempted a non-loopback connection to {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
