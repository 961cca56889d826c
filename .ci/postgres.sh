#!/usr/bin/env bash
# Start a throw-away PostgreSQL server on loopback for the retriever tests (a LangChain retriever
# over PostgreSQL's full-text search: tests/adapters/search/test_retriever_postgres.py).
# Installs Debian's postgresql when initdb is missing, creates a cluster in a temporary directory
# owned by the postgres user (the server refuses to run as root), trusts loopback connections,
# uses port 5432 when free (else a free port), waits until it accepts connections, and prints
# the URL on stdout:
#   export FACTCHECK_TEST_POSTGRES_URL="$(bash .ci/postgres.sh)"
# Everything else goes to stderr. Stop it with: pg_ctl -D DIR stop (as the user that started it).
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

bindir=""
find_bindir() {
    bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
}
find_bindir
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    log "installing postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    find_bindir
fi

port="$(python3 "$(dirname "$0")/loopback_port.py" 5432)"

dir="$(mktemp -d /tmp/factcheck-postgres.XXXXXX)"
as_owner=()
if [ "$(id -u)" = 0 ]; then
    chown postgres: "$dir"
    as_owner=(runuser -u postgres --)
fi
"${as_owner[@]}" "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >&2
"${as_owner[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >&2

if "$bindir/pg_isready" -h 127.0.0.1 -p "$port" -q; then
    log "postgres on 127.0.0.1:$port (data $dir/data, log $dir/postgres.log)"
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    exit 0
fi
log "postgres did not accept connections on port $port; log follows"
cat "$dir/postgres.log" >&2 || true
exit 1
