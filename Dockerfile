# xpukit's image, one Dockerfile for every profile. `invoke build` computes every build arg from
# env/pins.toml (`invoke build --dry-run` prints them); nothing here names a version.
#
# Stages: system (base + OS packages + ocloc + user) -> runtime (venv from the hash-locked lock file,
# wheels from the triton-* and torch-* stages, then the kit's sources and the manifest). The
# source-build stages (xpu profile) only run when TRITON_SOURCE / TORCH_SOURCE select them, and
# BuildKit builds the Triton and PyTorch stages in parallel.

ARG BASE_IMAGE=xpukit-base-not-set
ARG TRITON_SOURCE=pypi
ARG TORCH_SOURCE=none

FROM ${BASE_IMAGE} AS system
ARG XPUKIT_PROFILE
ARG APT_PACKAGES
ARG OCLOC_SOURCE
ARG OCLOC_PACKAGE
ARG OCLOC_VERSION
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8
COPY scripts/apt-env.sh scripts/install-apt.sh scripts/install-ocloc.sh scripts/clean-build-noise.sh /opt/xpukit/scripts/
RUN --mount=type=cache,id=xpukit-apt,target=/var/cache/xpukit-apt,sharing=locked \
    --mount=type=secret,id=ca_bundle \
    /opt/xpukit/scripts/install-apt.sh ${APT_PACKAGES} \
 && /opt/xpukit/scripts/install-ocloc.sh \
 && useradd --create-home --uid 10001 --user-group --shell /bin/bash xpukit \
 && install -d -o xpukit -g xpukit /home/xpukit/.cache/triton /home/xpukit/.cache/xpukit \
 && /opt/xpukit/scripts/clean-build-noise.sh xpukit

# ---- the compiled launch path (xpukit/runtime/ur/_launcher.c); the compiler stays in this stage
FROM system AS launcher
ARG BUILD_APT_PACKAGES
COPY scripts/apt-env.sh scripts/install-apt.sh scripts/build-launcher.sh /opt/xpukit/scripts/
RUN --mount=type=cache,id=xpukit-apt,target=/var/cache/xpukit-apt,sharing=locked \
    --mount=type=secret,id=ca_bundle \
    /opt/xpukit/scripts/install-apt.sh ${BUILD_APT_PACKAGES}
COPY xpukit/runtime/ur/_launcher.c /opt/xpukit/csrc/
RUN /opt/xpukit/scripts/build-launcher.sh /opt/xpukit/csrc/_launcher.c /opt/xpukit/ext

# ---- source builds (xpu profile): build tools only live in these stages
FROM system AS builder
ARG BUILD_APT_PACKAGES
COPY scripts/xpu-common.sh scripts/build-llvm.sh scripts/build-triton.sh scripts/build-pytorch.sh /opt/xpukit/scripts/
# Ubuntu 24.04's python3 refuses pip installs (PEP 668): the builds use their own venv.
RUN --mount=type=cache,id=xpukit-apt,target=/var/cache/xpukit-apt,sharing=locked \
    --mount=type=secret,id=ca_bundle \
    /opt/xpukit/scripts/install-apt.sh ${BUILD_APT_PACKAGES} \
 && python3 -m venv /opt/build-venv
ENV PATH=/opt/build-venv/bin:$PATH \
    PYTHON=/opt/build-venv/bin/python \
    LLVM_PREFIX=/opt/llvm \
    WHEEL_DIR=/wheels

FROM builder AS triton-git
ARG TRITON_REPO
ARG TRITON_COMMIT
ARG LLVM_SOURCE
ARG MAX_JOBS
RUN --mount=type=cache,id=xpukit-ccache,target=/root/.cache/ccache \
    --mount=type=cache,id=xpukit-triton-home,target=/root/.triton \
    --mount=type=cache,id=xpukit-pip,target=/root/.cache/pip \
    --mount=type=secret,id=ca_bundle \
    --mount=type=secret,id=github_token \
    /opt/xpukit/scripts/build-llvm.sh \
 && /opt/xpukit/scripts/build-triton.sh

FROM builder AS torch-source
ARG TORCH_SOURCE
ARG TORCH_COMMIT
ARG TORCH_XPU_ARCH_LIST
ARG MAX_JOBS
RUN --mount=type=cache,id=xpukit-ccache,target=/root/.cache/ccache \
    --mount=type=cache,id=xpukit-pip,target=/root/.cache/pip \
    --mount=type=secret,id=ca_bundle \
    --mount=type=secret,id=github_token \
    /opt/xpukit/scripts/build-pytorch.sh

FROM system AS torch-wheel
ARG TORCH_SOURCE
ARG TORCH_VERSION
ARG TORCH_INDEX_URL
COPY scripts/xpu-common.sh scripts/build-pytorch.sh /opt/xpukit/scripts/
RUN --mount=type=cache,id=xpukit-pip,target=/root/.cache/pip \
    --mount=type=secret,id=ca_bundle \
    python3 -m venv /opt/build-venv \
 && PYTHON=/opt/build-venv/bin/python WHEEL_DIR=/wheels /opt/xpukit/scripts/build-pytorch.sh

# Profiles whose Triton comes from PyPI or that ship no PyPI-external PyTorch get empty wheel dirs.
FROM system AS triton-pypi
RUN install -d /wheels

FROM system AS torch-none
RUN install -d /wheels

# The build args pick one stage each; these are stage names above, not images to tag (DL3006).
# hadolint ignore=DL3006
FROM triton-${TRITON_SOURCE} AS triton-wheels
# Same: torch-none, torch-wheel or torch-source, a stage above (DL3006 does not apply).
# hadolint ignore=DL3006
FROM torch-${TORCH_SOURCE} AS torch-wheels

# ---- runtime: what users get
FROM system AS runtime
ARG XPUKIT_PROFILE
ARG PYTHON_VERSION
ARG PYPI_PINS
ARG UR_SOURCE
ARG UR_VERSION
ARG UR_PACKAGES
ARG UR_MATRIX
COPY env/lock/${XPUKIT_PROFILE}.txt /opt/xpukit/env/requirements.lock
COPY scripts/install-python.sh scripts/check-ur.sh scripts/xpu-common.sh /opt/xpukit/scripts/
RUN --mount=type=cache,id=xpukit-wheelhouse,target=/var/cache/xpukit/wheelhouse,sharing=locked \
    --mount=type=secret,id=ca_bundle \
    --mount=type=bind,from=triton-wheels,source=/wheels,target=/tmp/xpukit-wheels/triton \
    --mount=type=bind,from=torch-wheels,source=/wheels,target=/tmp/xpukit-wheels/torch \
    /opt/xpukit/scripts/install-python.sh /opt/xpukit/env/requirements.lock \
        /tmp/xpukit-wheels/triton /tmp/xpukit-wheels/torch \
 && if [ "${UR_SOURCE}" = oneapi ]; then /opt/xpukit/scripts/check-ur.sh; fi

ENV VIRTUAL_ENV=/opt/xpukit/venv \
    PATH=/opt/xpukit/venv/bin:$PATH \
    PYTHONPATH=/opt/xpukit/src \
    TRITON_CACHE_DIR=/home/xpukit/.cache/triton \
    XPUKIT_CACHE_DIR=/home/xpukit/.cache/xpukit \
    XPUKIT_IN_CONTAINER=1

# Into the venv's site-packages, so it imports whatever PYTHONPATH a run sets. No step below writes
# bytecode: a .pyc records its source's mtime, which differs per checkout (docs/reproducible.md).
RUN --mount=type=bind,from=launcher,source=/opt/xpukit/ext,target=/tmp/xpukit-ext \
    export PYTHONDONTWRITEBYTECODE=1 \
 && cp /tmp/xpukit-ext/_xpukit_launcher*.so "$(python -c 'import sysconfig; print(sysconfig.get_path("platlib"))')/"

# The kit's own sources come last so that editing them never reinstalls a dependency.
COPY scripts/entrypoint.sh /opt/xpukit/scripts/
COPY pyproject.toml /opt/xpukit/src/
COPY env/pins.toml /opt/xpukit/src/env/pins.toml
COPY xpukit /opt/xpukit/src/xpukit
COPY examples /opt/xpukit/src/examples
COPY tests /opt/xpukit/src/tests

ARG BASE_IMAGE
ARG APT_PACKAGES
ARG OCLOC_SOURCE
ARG OCLOC_PACKAGE
ARG OCLOC_VERSION
ARG TRITON_SOURCE
ARG TRITON_VERSION
ARG TRITON_COMMIT
ARG TORCH_SOURCE
ARG TORCH_COMMIT
ARG XPUKIT_PINS
# What is installed, checked against the pins: the build fails on any difference.
RUN PYTHONDONTWRITEBYTECODE=1 python -m xpukit.runtime.image.manifest /opt/xpukit/manifest.json

# Labels last: their values change per commit and must not invalidate any layer above.
ARG XPUKIT_SOURCE
ARG XPUKIT_REVISION
ARG XPUKIT_CREATED
LABEL org.opencontainers.image.title="xpukit-${XPUKIT_PROFILE}" \
      org.opencontainers.image.description="Triton XPU environment kit (${XPUKIT_PROFILE} profile)" \
      org.opencontainers.image.source="${XPUKIT_SOURCE}" \
      org.opencontainers.image.revision="${XPUKIT_REVISION}" \
      org.opencontainers.image.created="${XPUKIT_CREATED}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      io.xpukit.profile="${XPUKIT_PROFILE}" \
      io.xpukit.pins.python="${PYTHON_VERSION}" \
      io.xpukit.pins.ocloc="${OCLOC_PACKAGE}=${OCLOC_VERSION}" \
      io.xpukit.pins.triton="${TRITON_SOURCE}:${TRITON_VERSION}${TRITON_COMMIT}" \
      io.xpukit.pins.torch="${TORCH_SOURCE}:${TORCH_COMMIT}" \
      io.xpukit.pins.ur="${UR_SOURCE}:${UR_VERSION}" \
      io.xpukit.pins.ur-matrix="${UR_MATRIX}" \
      io.xpukit.pins.pypi="${PYPI_PINS}" \
      io.xpukit.pins.digest="${XPUKIT_PINS}"

# The xpukit user created in the system stage, by number so every runtime resolves it.
USER 10001:10001
WORKDIR /home/xpukit
ENTRYPOINT ["/opt/xpukit/scripts/entrypoint.sh"]
CMD ["bash"]
