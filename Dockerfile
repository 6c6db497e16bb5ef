# xpukit's image, one Dockerfile for every profile. `invoke build` computes every build arg from
# env/pins.toml (`invoke build --dry-run` prints them); nothing here names a version. The image's
# layout (user, paths) comes from xpukit/layout.py as the XPUKIT_* build args: nothing here names a
# path of the kit's either, but the ENTRYPOINT (exec form expands nothing; tests/host/test_dockerfile.py).
#
# Stages: system (base + OS packages + ocloc from a package of the base + user) -> runtime (venv from
# the hash-locked lock file, wheels from the triton-* and torch-* stages, the compiler folder from the
# ocloc-* stage, then the kit's sources and the manifest). The source-build stages (xpu profile) only
# run when TRITON_SOURCE / TORCH_SOURCE select them, the ocloc-folder stage (cpu profile) when
# OCLOC_STAGE does, and BuildKit builds these stages in parallel.

ARG BASE_IMAGE=xpukit-base-not-set
ARG TRITON_SOURCE=pypi
ARG TORCH_SOURCE=none
ARG OCLOC_STAGE=none

FROM ${BASE_IMAGE} AS system
ARG XPUKIT_PROFILE
ARG XPUKIT_USER
ARG XPUKIT_UID
ARG XPUKIT_HOME
ARG XPUKIT_TRITON_CACHE
ARG XPUKIT_KIT_CACHE
ARG XPUKIT_SCRIPTS
ARG APT_PACKAGES
ARG OCLOC_SOURCE
ARG OCLOC_PACKAGE
ARG OCLOC_VERSION
ARG OCLOC_IGC_PACKAGE
ARG OMIX_PACKAGE
ARG OMIX_VERSION
ARG OMIX_APT_REPO
ARG OMIX_APT_KEY
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8
RUN test -n "${XPUKIT_SCRIPTS}" || { echo "error: the XPUKIT_* build args are not set (fix: build with invoke build)" >&2; exit 2; }
COPY scripts/common.sh scripts/install-apt.sh scripts/install-omix.sh scripts/install-ocloc.sh scripts/clean-build-noise.sh ${XPUKIT_SCRIPTS}/
# Every RUN --mount target of a stage the image is made of is a folder right under /run that nothing
# else uses: buildah 1.28 removes a target it created only when the target and its store's path start
# with different folders (/var/cache/... stayed in layers built in a store under /var, /tmp/... in
# one under /tmp). /run/... goes wherever the store is, and /run is in every RUN layer anyway
# (docs/reproducible.md, "Mount points"; tests/host/test_dockerfile.py).
RUN --mount=type=cache,id=xpukit-apt,target=/run/xpukit-apt,sharing=locked \
    --mount=type=secret,id=ca_bundle \
    ${XPUKIT_SCRIPTS}/install-apt.sh ${APT_PACKAGES} \
 && ${XPUKIT_SCRIPTS}/install-omix.sh \
 && ${XPUKIT_SCRIPTS}/install-ocloc.sh \
 && useradd --create-home --home-dir "${XPUKIT_HOME}" --uid "${XPUKIT_UID}" --user-group --shell /bin/bash "${XPUKIT_USER}" \
 && install -d -o "${XPUKIT_USER}" -g "${XPUKIT_USER}" "${XPUKIT_TRITON_CACHE}" "${XPUKIT_KIT_CACHE}" \
 && ${XPUKIT_SCRIPTS}/clean-build-noise.sh "${XPUKIT_USER}"

# ---- today's ocloc, IGC and iga64 (cpu profile): Debian packages of a newer suite, each checked against
# its pinned SHA-256, unpacked into one folder with their own loader and C/C++ runtime that the runtime
# stage copies (scripts/assemble-ocloc.sh). FROM the base, not system: BuildKit builds it alongside.
FROM ${BASE_IMAGE} AS ocloc-folder
ARG OCLOC_DEBS
ARG OCLOC_MIRROR
ARG OCLOC_SUITE
ARG OCLOC_PACKAGE
ARG XPUKIT_COMPILER
ARG XPUKIT_SCRIPTS
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY scripts/common.sh scripts/assemble-ocloc.sh ${XPUKIT_SCRIPTS}/
RUN --mount=type=cache,id=xpukit-ocloc-apt,target=/run/xpukit-ocloc-apt,sharing=locked \
    --mount=type=secret,id=ca_bundle \
    OCLOC_PREFIX="${XPUKIT_COMPILER}" ${XPUKIT_SCRIPTS}/assemble-ocloc.sh

# Profiles whose ocloc is a package of their own base (xpu) copy an empty folder.
FROM ${BASE_IMAGE} AS ocloc-none
ARG XPUKIT_COMPILER
RUN install -d "${XPUKIT_COMPILER}/bin"

# OCLOC_STAGE picks ocloc-folder or ocloc-none, stages above (DL3006 does not apply).
# hadolint ignore=DL3006
FROM ocloc-${OCLOC_STAGE} AS ocloc

# ---- the compiled launch path: the UR launcher (xpukit/runtime/ur/_launcher*.c) and Triton's dispatch
# on it (xpukit/runtime/triton/_dispatch*.c); the compiler stays in this stage
FROM system AS launcher
ARG BUILD_APT_PACKAGES
ARG XPUKIT_SCRIPTS
COPY scripts/build-launcher.sh ${XPUKIT_SCRIPTS}/
RUN --mount=type=cache,id=xpukit-apt,target=/run/xpukit-apt,sharing=locked \
    --mount=type=secret,id=ca_bundle \
    ${XPUKIT_SCRIPTS}/install-apt.sh ${BUILD_APT_PACKAGES}
COPY xpukit/runtime/ur/_launcher*.c xpukit/runtime/ur/_launcher*.h xpukit/runtime/triton/_dispatch*.c xpukit/runtime/triton/_dispatch.h /tmp/xpukit-csrc/
# Laid out as the venv's site-packages, which the runtime stage copies it into.
RUN ${XPUKIT_SCRIPTS}/build-launcher.sh \
        "/tmp/xpukit-venv/$(python3 -c 'import sys; print("lib/python%d.%d/site-packages" % sys.version_info[:2])')" \
        /tmp/xpukit-csrc/_launcher*.c /tmp/xpukit-csrc/_dispatch*.c

# ---- source builds (xpu profile): build tools only live in these stages
FROM system AS builder
ARG BUILD_APT_PACKAGES
ARG XPUKIT_SCRIPTS
COPY scripts/build-llvm.sh scripts/build-triton.sh scripts/build-pytorch.sh ${XPUKIT_SCRIPTS}/
# Ubuntu's python3 refuses pip installs (PEP 668): the builds use their own venv.
RUN --mount=type=cache,id=xpukit-apt,target=/run/xpukit-apt,sharing=locked \
    --mount=type=secret,id=ca_bundle \
    ${XPUKIT_SCRIPTS}/install-apt.sh ${BUILD_APT_PACKAGES} \
 && python3 -m venv /opt/build-venv
ENV PATH=/opt/build-venv/bin:$PATH \
    PYTHON=/opt/build-venv/bin/python \
    LLVM_PREFIX=/opt/llvm \
    WHEEL_DIR=/wheels

FROM builder AS triton-git
ARG TRITON_REPO
ARG TRITON_COMMIT
ARG LLVM_SOURCE
ARG LLVM_COMMIT
ARG MAX_JOBS
ARG XPUKIT_SCRIPTS
RUN --mount=type=cache,id=xpukit-ccache,target=/root/.cache/ccache \
    --mount=type=cache,id=xpukit-triton-home,target=/root/.triton \
    --mount=type=cache,id=xpukit-pip,target=/root/.cache/pip \
    --mount=type=secret,id=ca_bundle \
    --mount=type=secret,id=github_token \
    ${XPUKIT_SCRIPTS}/build-llvm.sh \
 && ${XPUKIT_SCRIPTS}/build-triton.sh

FROM builder AS torch-source
ARG TORCH_SOURCE
ARG TORCH_COMMIT
# An empty TORCH_COMMIT is read from this Triton commit's .github/pins/pytorch.txt at build time.
ARG TRITON_REPO
ARG TRITON_COMMIT
ARG TORCH_XPU_ARCH_LIST
ARG MAX_JOBS
ARG XPUKIT_SCRIPTS
RUN --mount=type=cache,id=xpukit-ccache,target=/root/.cache/ccache \
    --mount=type=cache,id=xpukit-pip,target=/root/.cache/pip \
    --mount=type=secret,id=ca_bundle \
    --mount=type=secret,id=github_token \
    ${XPUKIT_SCRIPTS}/build-pytorch.sh

FROM system AS torch-wheel
ARG TORCH_SOURCE
ARG TORCH_VERSION
ARG TORCH_INDEX_URL
ARG XPUKIT_SCRIPTS
COPY scripts/build-pytorch.sh ${XPUKIT_SCRIPTS}/
RUN --mount=type=cache,id=xpukit-pip,target=/root/.cache/pip \
    --mount=type=secret,id=ca_bundle \
    python3 -m venv /opt/build-venv \
 && PYTHON=/opt/build-venv/bin/python WHEEL_DIR=/wheels ${XPUKIT_SCRIPTS}/build-pytorch.sh

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
ARG TRITON_SOURCE
ARG TORCH_SOURCE
ARG PYTHON_VERSION
ARG PYPI_PINS
ARG UR_SOURCE
ARG UR_VERSION
ARG UR_PACKAGES
ARG UR_MATRIX
ARG XPUKIT_ROOT
ARG XPUKIT_SCRIPTS
ARG XPUKIT_VENV
ARG XPUKIT_SRC
ARG XPUKIT_MANIFEST
ARG XPUKIT_TRITON_CACHE
ARG XPUKIT_KIT_CACHE
ARG XPUKIT_UID
ARG XPUKIT_HOME
ARG XPUKIT_COMPILER
COPY env/lock/${XPUKIT_PROFILE}.txt ${XPUKIT_ROOT}/env/requirements.lock
COPY scripts/install-python.sh scripts/check-ur.sh ${XPUKIT_SCRIPTS}/
RUN --mount=type=cache,id=xpukit-wheelhouse,target=/run/xpukit-wheelhouse,sharing=locked \
    --mount=type=secret,id=ca_bundle \
    --mount=type=bind,from=triton-wheels,source=/wheels,target=/run/xpukit-wheels-triton \
    --mount=type=bind,from=torch-wheels,source=/wheels,target=/run/xpukit-wheels-torch \
    ${XPUKIT_SCRIPTS}/install-python.sh ${XPUKIT_ROOT}/env/requirements.lock \
        "$([ "${TRITON_SOURCE}" = pypi ] || echo --expect)" /run/xpukit-wheels-triton \
        "$([ "${TORCH_SOURCE}" = none ] || echo --expect)" /run/xpukit-wheels-torch \
 && if [ "${UR_SOURCE}" = oneapi ]; then ${XPUKIT_SCRIPTS}/check-ur.sh; fi

# The cpu profile's compiler folder (empty for xpu): its bin/ holds only the ocloc and iga64 wrappers.
COPY --from=ocloc ${XPUKIT_COMPILER}/ ${XPUKIT_COMPILER}/

ENV VIRTUAL_ENV=${XPUKIT_VENV} \
    PATH=${XPUKIT_VENV}/bin:${XPUKIT_COMPILER}/bin:$PATH \
    PYTHONPATH=${XPUKIT_SRC} \
    TRITON_CACHE_DIR=${XPUKIT_TRITON_CACHE} \
    XPUKIT_CACHE_DIR=${XPUKIT_KIT_CACHE} \
    XPUKIT_IN_CONTAINER=1

# The launch path into the venv's site-packages, so it imports whatever PYTHONPATH a run sets. A COPY,
# not a bind mount: buildah 1.28 mounts nothing from a stage that comes from the layer cache, which
# broke a warm rebuild after a lock change (docs/reproducible.md, "Mount points"). No step below
# writes bytecode: a .pyc records its source's mtime, which differs per checkout.
COPY --from=launcher /tmp/xpukit-venv/ ${XPUKIT_VENV}/

# The kit's own sources come last so that editing them never reinstalls a dependency.
COPY scripts/entrypoint.sh ${XPUKIT_SCRIPTS}/
COPY pyproject.toml ${XPUKIT_SRC}/
COPY env/pins.toml ${XPUKIT_SRC}/env/pins.toml
COPY xpukit ${XPUKIT_SRC}/xpukit
# Triton's own backend discovery finds the kit's driver: triton/backends/xpukit (docs/driver.md).
RUN PYTHONDONTWRITEBYTECODE=1 python -m xpukit.runtime.triton.backend install
COPY examples ${XPUKIT_SRC}/examples
COPY tests ${XPUKIT_SRC}/tests

ARG BASE_IMAGE
ARG APT_PACKAGES
ARG OCLOC_SOURCE
ARG OCLOC_PACKAGE
ARG OCLOC_VERSION
ARG OCLOC_IGC_PACKAGE
ARG OMIX_PACKAGE
ARG OMIX_VERSION
ARG OCLOC_DEBS
ARG TRITON_SOURCE
ARG TRITON_VERSION
ARG TRITON_COMMIT
ARG TORCH_SOURCE
ARG TORCH_COMMIT
ARG XPUKIT_PINS
# What is installed, checked against the pins: the build fails on any difference.
RUN PYTHONDONTWRITEBYTECODE=1 python -m xpukit.runtime.image.manifest "${XPUKIT_MANIFEST}"

# Labels last: their values change per commit and must not invalidate any layer above.
ARG XPUKIT_REVISION
ARG XPUKIT_CREATED
LABEL org.opencontainers.image.title="xpukit-${XPUKIT_PROFILE}" \
      org.opencontainers.image.description="Triton XPU environment kit (${XPUKIT_PROFILE} profile)" \
      org.opencontainers.image.revision="${XPUKIT_REVISION}" \
      org.opencontainers.image.created="${XPUKIT_CREATED}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      io.xpukit.profile="${XPUKIT_PROFILE}" \
      io.xpukit.pins.python="${PYTHON_VERSION}" \
      io.xpukit.pins.ocloc="${OCLOC_PACKAGE}=${OCLOC_VERSION}" \
      io.xpukit.pins.ocloc-debs="${OCLOC_DEBS}" \
      io.xpukit.pins.triton="${TRITON_SOURCE}:${TRITON_VERSION}${TRITON_COMMIT}" \
      io.xpukit.pins.torch="${TORCH_SOURCE}:${TORCH_COMMIT}" \
      io.xpukit.pins.ur="${UR_SOURCE}:${UR_VERSION}" \
      io.xpukit.pins.ur-matrix="${UR_MATRIX}" \
      io.xpukit.pins.pypi="${PYPI_PINS}" \
      io.xpukit.pins.digest="${XPUKIT_PINS}"

# The xpukit user created in the system stage, by number so every runtime resolves it.
USER ${XPUKIT_UID}:${XPUKIT_UID}
WORKDIR ${XPUKIT_HOME}
# Exec form expands no variable: layout.ENTRYPOINT, checked by tests/host/test_dockerfile.py.
ENTRYPOINT ["/opt/xpukit/scripts/entrypoint.sh"]
CMD ["bash"]

# ---- optional layers after the image above, which they never change (`invoke build --with NAME`)
# dpnp and dpctl, Intel's SYCL arrays, with their runtime (oneMKL, SYCL; 1.9 GB as pip installs them, a
# 1.6 GB layer once install-layer.sh has stripped and hard-linked what it added): env/lock/<profile>-dpnp.txt.
FROM runtime AS dpnp
ARG XPUKIT_PROFILE
ARG XPUKIT_ROOT
ARG XPUKIT_SCRIPTS
ARG XPUKIT_VENV
ARG XPUKIT_UID
USER 0:0
COPY env/lock/${XPUKIT_PROFILE}-dpnp.txt ${XPUKIT_ROOT}/env/requirements-dpnp.lock
COPY scripts/install-layer.sh ${XPUKIT_SCRIPTS}/
RUN --mount=type=cache,id=xpukit-wheelhouse,target=/run/xpukit-wheelhouse,sharing=locked \
    --mount=type=secret,id=ca_bundle \
    ${XPUKIT_SCRIPTS}/install-layer.sh ${XPUKIT_ROOT}/env/requirements-dpnp.lock
# The ICD loader reads its vendors once per process: set here, dpctl and the kit find the CPU device
# whichever is imported first; OCL_ICD_VENDORS stays unset (both would list the platform twice).
ENV OCL_ICD_FILENAMES=${XPUKIT_VENV}/lib/libintelocl.so \
    XPUKIT_REQUIRE_DPNP=1
USER ${XPUKIT_UID}:${XPUKIT_UID}
