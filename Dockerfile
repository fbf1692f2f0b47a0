# syntax=docker/dockerfile:1
# Every Memento service's image: SERVICE names its folder under services/. Build from the repository root:
#   docker build --build-arg SERVICE=gateway -t memento/gateway:latest .
# gateway (the MCP edge, the only service published outside), memory-api (the memory tools behind it; its image also
# runs memento-migrate), embedder (vectors, on the bundled offline model by default), evaluator and consolidator
# (arq workers). docker-compose.yml and deploy/k8s build their images from here.

# --- build: a virtualenv holding memento-shared and the service, installed non-editable ---
FROM python:3.11-slim AS build
ARG SERVICE
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# Each service's port setting and its default (the same as each service's settings class, memento_<service>/settings.py), for the HEALTHCHECK below;
# any other SERVICE stops the build here.
RUN case "$SERVICE" in \
      gateway) echo "PORT 56332" ;; \
      memory-api) echo "MEMORY_API_PORT 56333" ;; \
      embedder) echo "EMBEDDER_PORT 56334" ;; \
      evaluator) echo "EVALUATOR_PORT 56335" ;; \
      consolidator) echo "CONSOLIDATOR_PORT 56336" ;; \
      *) echo "build with --build-arg SERVICE=gateway|memory-api|embedder|evaluator|consolidator" >&2; exit 1 ;; \
    esac > /tmp/port \
 && python -m venv /opt/venv \
 && mv /tmp/port /opt/venv/memento-port
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY constraints.txt ./
COPY shared/ ./shared/
COPY services/${SERVICE}/ ./services/${SERVICE}/
# memento-service: the one command the runtime stage starts, whichever service this image holds
RUN pip install --no-cache-dir -c constraints.txt ./shared "./services/${SERVICE}" \
 && ln -s "memento-${SERVICE}" /opt/venv/bin/memento-service

# --- runtime: the virtualenv only, no build tree, a non-root numeric user ---
FROM python:3.11-slim
ARG SERVICE
LABEL org.opencontainers.image.title="memento-${SERVICE}" \
      org.opencontainers.image.description="Memento ${SERVICE}"
RUN groupadd --system --gid 10001 memento \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin memento
COPY --from=build /opt/venv /opt/venv
# Containers listen on every interface; anything written at run time goes to /tmp (the root fs may be read-only).
# OMP_*: the embedder's OpenMP pool is a fixed, small number of threads that sleep when idle instead of spinning
# (memory-api's numpy reads the thread count too: its BLAS stays within the same two threads).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MEMENTO_BIND_HOST=0.0.0.0 \
    MEMENTO_DATA_DIR=/tmp/memento \
    XDG_CACHE_HOME=/tmp/.cache \
    OTEL_SERVICE_NAME=memento-${SERVICE} \
    OMP_NUM_THREADS=2 \
    OMP_WAIT_POLICY=PASSIVE
WORKDIR /app
USER 10001:10001
# No EXPOSE: the port is the service's own (the table above); compose and the manifests name it.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; name, port = open('/opt/venv/memento-port').read().split(); u.urlopen(f'http://127.0.0.1:{os.environ.get(name, port)}/health', timeout=4)"]
CMD ["memento-service"]
