# syntax=docker/dockerfile:1
# The database-operator image: `docker build -t IMAGE .` (see `make docker-build`).
#
# Base: BASE_IMAGE, by default the official python:3.11.17-slim-bookworm, pinned by tag and by
# the digest of its multi-platform index (amd64 and arm64 resolve from it). With both given, the
# digest wins: bump the tag and the digest together. Both stages use the same base so the venv's
# interpreter (/usr/local/bin/python3.11 in the official image) exists in the final image.
# Another Python 3.11 base may be given with `--build-arg BASE_IMAGE=...`: the real-node tests
# build this image without a registry, on a Python made of Debian's packages
# (hack/images/operator). It needs `python` on PATH with venv and pip, and groupadd/useradd.
# checkov cannot see through ARG (CKV_DOCKER_7 finds no tag in ${BASE_IMAGE}): the pin is here.
# checkov:skip=CKV_DOCKER_7: the base is an ARG whose default is pinned by tag and digest
ARG BASE_IMAGE=python:3.11.17-slim-bookworm@sha256:0a310eeecf4e1f5a0743f9a6520c90c88d089c903ca5fd283f501e3a805f5f89

# ---------------------------------------------------------------------------------------------
# builder: the locked dependencies, then the operator (--no-deps), into the venv /opt/venv.
# Every locked dependency ships a cp311 wheel, so no compiler is needed (slim has none).
# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1

WORKDIR /src
RUN python -m venv /opt/venv

# Dependencies first: this layer stays cached until requirements.lock changes.
COPY requirements.lock ./
RUN /opt/venv/bin/pip install --no-cache-dir -r requirements.lock

# LICENSE: pyproject.toml's license-files; without it the wheel's metadata would carry no licence.
COPY pyproject.toml README.md LICENSE ./
COPY operator/ ./operator/
# pip byte-compiles what it installs, so the final image never needs to write a .pyc.
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps . \
    && /opt/venv/bin/pip check \
    && /opt/venv/bin/pip uninstall --yes pip setuptools

# ---------------------------------------------------------------------------------------------
# runtime: the interpreter from the base image, the venv, a non-root numeric user. Nothing in
# it writes to the filesystem, so it runs with readOnlyRootFilesystem: true.
# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS runtime

# A fixed numeric UID:GID so Kubernetes' runAsNonRoot can verify it without reading
# /etc/passwd; the passwd entry only gives logs and tools a name. No home, no login shell.
RUN groupadd --system --gid 65532 database-operator \
    && useradd --system --no-log-init --uid 65532 --gid 65532 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin database-operator

COPY --from=builder /opt/venv /opt/venv

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

USER 65532:65532

# 8080: /metrics, 8081: /healthz and /readyz (DATABASE_OPERATOR_METRICS_PORT / _HEALTH_PORT).
EXPOSE 8080 8081

# Liveness and readiness come from the Deployment's probes on 8081, not from Docker.
HEALTHCHECK NONE

# Last, so a new revision or date only rebuilds this metadata, not a layer.
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=
ARG SOURCE=https://github.com/example/database-operator
ARG BASE_IMAGE
LABEL org.opencontainers.image.title="database-operator" \
      org.opencontainers.image.description="A Kubernetes operator, written on Kopf, that turns a Database custom resource into a running PostgreSQL, MySQL or Redis." \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

ENTRYPOINT ["database-operator"]
CMD ["run"]
