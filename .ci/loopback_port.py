"""Print a TCP port for a throw-away server on 127.0.0.1: the one given when it is free, else
one the kernel picks. Used by .ci/redis.sh and .ci/postgres.sh:  port="$(python3 .ci/loopback_port.py 6379)"."""

import socket
import sys


def free(port: int) -> int | None:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return None
        return s.getsockname()[1]


print(free(int(sys.argv[1])) or free(0))
