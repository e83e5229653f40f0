# syntax=docker/dockerfile:1
# tritonpy in a container: `docker build -t tritonpy .` then
#   docker run -p 8000-8002:8000-8002 -v $PWD/model_repository:/models tritonpy
# Build arguments:
#   BACKENDS  backend plugins to install (folders of plugins/): onnx python torch fil tensorrt
#   EXTRAS    extras of the server: s3 gcs azure (object-store repositories), grpcio
#   BASE      the Python image both stages start from (the same Python in both)
ARG BASE=python:3.12-slim-bookworm

FROM ${BASE} AS build
ARG BACKENDS="onnx python"
ARG EXTRAS="s3"
RUN python -m venv /opt/tritonpy
COPY . /src
# One pip call: the plugins' tritonpy-sdk comes from /src/sdk, not from an index.
RUN set -eu; \
    extras=$(echo "$EXTRAS" | tr ' ' ','); \
    plugins=""; for b in $BACKENDS; do plugins="$plugins /src/plugins/$b"; done; \
    /opt/tritonpy/bin/pip install --no-cache-dir /src/sdk "/src[$extras]" $plugins

FROM ${BASE}
COPY --from=build /opt/tritonpy /opt/tritonpy
ENV PATH=/opt/tritonpy/bin:$PATH \
    PYTHONUNBUFFERED=1
RUN useradd --uid 1000 --user-group --create-home --shell /usr/sbin/nologin tritonpy \
    && mkdir /models && chown tritonpy:tritonpy /models
USER 1000:1000
WORKDIR /home/tritonpy
# HTTP, gRPC, metrics (Triton's ports)
EXPOSE 8000 8001 8002
# SIGTERM drains: new requests refused, in-flight ones finish, models unload, all within
# --exit-timeout-secs (30 by default); give `docker stop -t` / the pod's grace period more.
STOPSIGNAL SIGTERM
# Ready once the models loaded; this probes the default HTTP port (8000).
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/v2/health/ready', timeout=2).status != 200)"]
ENTRYPOINT ["tritonpy", "serve"]
CMD ["--model-repository", "/models"]
