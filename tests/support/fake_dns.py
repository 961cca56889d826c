"""A logging fake DNS server for the no-phone-home test: every name asked (UDP or TCP, port
53 on 127.0.0.1 of a fresh network namespace) is written to the log, one ``name qtype`` a
line, and answered NXDOMAIN. Run as ``python -m tests.support.fake_dns LOG``; prints
``ready`` once it listens. It brings the namespace's loopback interface up itself (no need
for iproute2's ``ip``)."""

from __future__ import annotations

import fcntl
import socket
import struct
import sys
import threading

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def question(query: bytes) -> tuple[str, int, int]:
    """The first question's name, type and end offset of a DNS query."""
    i, labels = 12, []
    while query[i]:
        n = query[i]
        labels.append(query[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += n + 1
    qtype = struct.unpack(">H", query[i + 1:i + 3])[0]
    return ".".join(labels), qtype, i + 5


def nxdomain(query: bytes, log: object) -> bytes:
    name, qtype, end = question(query)
    log.write(f"{name.lower()} {qtype}\n")  # type: ignore[attr-defined]
    # response, recursion desired and available, NXDOMAIN; the question echoed, no answers
    return query[:2] + struct.pack(">HHHHH", 0x8183, 1, 0, 0, 0) + query[12:end]


def loopback_up() -> None:
    """``ip link set lo up``, by ioctl: a fresh network namespace starts with it down."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", 0, bytes(14))
        flags = struct.unpack("16sH14s", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | _IFF_UP, bytes(14)))


def serve(log_path: str) -> None:
    loopback_up()
    log = open(log_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 53))
    tcp = socket.socket()
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("127.0.0.1", 53))
    tcp.listen()

    def serve_tcp() -> None:
        while True:
            conn, _ = tcp.accept()
            with conn:
                try:
                    size = struct.unpack(">H", conn.recv(2))[0]
                    answer = nxdomain(conn.recv(size), log)
                    conn.sendall(struct.pack(">H", len(answer)) + answer)
                except (OSError, struct.error, IndexError):
                    continue

    threading.Thread(target=serve_tcp, daemon=True).start()
    print("ready", flush=True)
    while True:
        query, peer = udp.recvfrom(4096)
        try:
            udp.sendto(nxdomain(query, log), peer)
        except (OSError, struct.error, IndexError) as exc:
            log.write(f"! {exc}\n")


if __name__ == "__main__":
    serve(sys.argv[1])
