# syntax=docker/dockerfile:1
# The factcheck proxy. One Dockerfile, two images chosen by a build argument:
#   CPU (default, python slim):   docker build -t factcheck:cpu .
#   GPU (CUDA runtime + cuDNN, onnxruntime-gpu from the `gpu` extra):
#                                 docker build --build-arg VARIANT=gpu -t factcheck:gpu .
#                                 docker run --gpus all -p 8000:8000 factcheck:gpu
# Models and the local index live under FACTCHECK_HOME=/data (settings default to
# /data/models and /data/index); both are volumes, so exports and indexes survive upgrades.
# Configure with FACTCHECK_* variables, e.g. FACTCHECK_UPSTREAM_URL=https://api.example/v1.
ARG VARIANT=cpu
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

# ---------------------------------------------------------------- bases
FROM ${PYTHON_IMAGE} AS base-cpu
RUN python -m venv /opt/venv

FROM ${CUDA_IMAGE} AS base-gpu
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv

# ---------------------------------------------------------------- the image
FROM base-${VARIANT} AS runtime
ARG VARIANT
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FACTCHECK_HOME=/data \
    FACTCHECK_HOST=0.0.0.0 \
    FACTCHECK_PORT=8000

WORKDIR /app
COPY pyproject.toml README.md ./
COPY middleware ./middleware
COPY adapters ./adapters
COPY onnx_models ./onnx_models
COPY load_tests ./load_tests

# GPU: install the `gpu` extra, then drop the CPU onnxruntime the base dependencies bring
# (both wheels provide the `onnxruntime` package) and reinstall the GPU build over it.
RUN set -eux; \
    if [ "$VARIANT" = "gpu" ]; then \
        pip install ".[gpu]"; \
        gpu_pin="$(pip freeze | grep -i '^onnxruntime-gpu==')"; \
        pip uninstall -y onnxruntime onnxruntime-gpu; \
        pip install --no-deps "$gpu_pin"; \
    else \
        pip install .; \
    fi; \
    python -c "import onnxruntime as ort; print('onnxruntime', ort.__version__, ort.get_available_providers())"

# Non-root user owning only the data directories.
RUN useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin factcheck \
    && mkdir -p /data/models /data/index \
    && chown -R factcheck:factcheck /data
USER factcheck
VOLUME ["/data/models", "/data/index"]
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('FACTCHECK_PORT', '8000'), timeout=4)"]

ENTRYPOINT ["factcheck"]
CMD ["serve"]
