#!/usr/bin/env bash
# Start a throw-away redis-server on loopback for the Redis cache tests.
# Installs redis-server with apt-get when missing, uses port 6379 when free (else a free
# port), daemonizes it without persistence, waits for PING, and prints the URL on stdout:
#   export FACTCHECK_TEST_REDIS_URL="$(bash .ci/redis.sh)"
# Everything else goes to stderr. Stop it with: redis-cli -p PORT shutdown nosave
set -euo pipefail

log() { echo "redis.sh: $*" >&2; }

if ! command -v redis-server >/dev/null 2>&1; then
    log "installing redis-server"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq redis-server >&2
fi

port="$(python3 "$(dirname "$0")/loopback_port.py" 6379)"

dir="$(mktemp -d /tmp/factcheck-redis.XXXXXX)"
redis-server --bind 127.0.0.1 --port "$port" --daemonize yes --save "" --appendonly no \
    --protected-mode yes --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >&2

for _ in $(seq 1 100); do
    if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
        log "redis-server on 127.0.0.1:$port (pid $(cat "$dir/redis.pid" 2>/dev/null || echo ?), log $dir/redis.log)"
        echo "redis://127.0.0.1:$port/0"
        exit 0
    fi
    sleep 0.1
done
log "redis-server did not answer PING on port $port; log follows"
cat "$dir/redis.log" >&2 || true
exit 1
