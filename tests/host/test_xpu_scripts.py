"""The xpu build scripts' plans: every --dry-run, their input checks, and the parts that run here
(the exact-commit checkout helper against a local repository, check-ur.sh against fake trees)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.unit

SCRIPTS = ROOT / "scripts"
ZEBIN = "9e237132e02d6e813836ad6a7137bd275fc0a7cd"
BLOG = "197f5f843fd17deab1de1df1c6f17e60978ecdce"
TORCH = "a47976948863783de4a5b27dc9f05d8be916d559"
LLVM_AT_ZEBIN = "f6ded0be897e2878612dd903f7e8bb85448269e5"  # cmake/llvm-hash.txt at ZEBIN
TRITON_URL = "https://github.com/intel/intel-xpu-backend-for-triton"
FETCH = "fetch --depth 1 --no-tags"
SCRIPT_NAMES = ["build-llvm.sh", "build-triton.sh", "build-pytorch.sh", "check-ur.sh"]


def sh(script: str, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path / "home"),
        "GITHUB_TOKEN_FILE": str(tmp_path / "no-token"),
        "MAX_JOBS": "8",
        # Paths under tmp_path so a dry run that ran anything would leave traces there.
        "TRITON_SRC": str(tmp_path / "src/triton"),
        "LLVM_SRC": str(tmp_path / "src/llvm-project"),
        "TORCH_SRC": str(tmp_path / "src/pytorch"),
        "WHEEL_DIR": str(tmp_path / "wheels"),
        "LLVM_PREFIX": str(tmp_path / "llvm"),
    }
    return subprocess.run(
        ["bash", str(SCRIPTS / script), *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def dry(script: str, tmp_path: Path, **env: str) -> list[str]:
    proc = sh(script, tmp_path, "--dry-run", **env)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert not (tmp_path / "src").exists() and not (tmp_path / "wheels").exists(), "a dry run ran something"
    return proc.stdout.splitlines()


def commands(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("#")]


def fake_triton_checkout(tmp_path: Path, llvm_hash: str = LLVM_AT_ZEBIN, old_layout: bool = False) -> None:
    src = tmp_path / "src/triton"
    (src / "cmake").mkdir(parents=True)
    (src / "cmake/llvm-hash.txt").write_text(llvm_hash + "\n")
    (src / "python").mkdir()
    (src / ("python/setup.py" if old_layout else "setup.py")).write_text("")


# ---- help and bad input -------------------------------------------------------------------------


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_help(script, tmp_path):
    proc = sh(script, tmp_path, "--help")
    assert proc.returncode == 0 and proc.stdout.startswith(f"usage: {script}")
    assert "--dry-run" in proc.stdout


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_unknown_argument(script, tmp_path):
    proc = sh(script, tmp_path, "--bogus", TRITON_COMMIT=ZEBIN)
    assert proc.returncode == 2 and "unknown argument: --bogus" in proc.stderr


@pytest.mark.parametrize("script", ["build-llvm.sh", "build-triton.sh"])
@pytest.mark.parametrize(
    ("commit", "message"),
    [
        ("", "TRITON_COMMIT is empty"),
        ("9e237132", "has 8 characters, not 40"),
        ("main", "is not a lowercase hex commit hash"),
        (ZEBIN.upper(), "is not a lowercase hex commit hash"),
        (ZEBIN + "0", "has 41 characters"),
    ],
)
def test_triton_commit_is_checked(script, commit, message, tmp_path):
    proc = sh(script, tmp_path, "--dry-run", TRITON_COMMIT=commit)
    assert proc.returncode == 2
    assert message in proc.stderr and "fix:" in proc.stderr


@pytest.mark.parametrize("script", ["build-llvm.sh", "build-triton.sh"])
def test_llvm_source_is_checked(script, tmp_path):
    proc = sh(script, tmp_path, "--dry-run", TRITON_COMMIT=ZEBIN, LLVM_SOURCE="download")
    assert proc.returncode == 2 and "is not prebuilt or source" in proc.stderr


@pytest.mark.parametrize("jobs", ["0", "many", "-1"])
def test_max_jobs_is_checked(jobs, tmp_path):
    proc = sh("build-triton.sh", tmp_path, "--dry-run", TRITON_COMMIT=ZEBIN, MAX_JOBS=jobs)
    assert proc.returncode == 2 and "MAX_JOBS" in proc.stderr


# ---- build-llvm.sh ------------------------------------------------------------------------------


def test_llvm_prebuilt_only_records_the_choice(tmp_path):
    lines = dry("build-llvm.sh", tmp_path, TRITON_COMMIT=ZEBIN)
    prefix = tmp_path / "llvm"
    assert commands(lines) == [
        f"mkdir -p {prefix}",
        f"printf '%s\\n' source=prebuilt triton_commit={ZEBIN} > {prefix}/xpukit-llvm.txt",
    ]
    assert any("Triton's setup.py downloads the LLVM" in line for line in lines)


def test_llvm_prebuilt_real_run_writes_the_marker(tmp_path):
    proc = sh("build-llvm.sh", tmp_path, TRITON_COMMIT=ZEBIN)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "llvm/xpukit-llvm.txt").read_text() == f"source=prebuilt\ntriton_commit={ZEBIN}\n"


def test_llvm_source_plan_reads_the_hash_at_run_time(tmp_path):
    lines = commands(dry("build-llvm.sh", tmp_path, TRITON_COMMIT=ZEBIN, LLVM_SOURCE="source"))
    triton = tmp_path / "src/triton"
    assert lines[:4] == [
        f"git init -q {triton}",
        f"git -C {triton} {FETCH} {TRITON_URL} {ZEBIN}",
        f"git -C {triton} -c advice.detachedHead=false checkout -q --detach FETCH_HEAD",
        f'test "$(git -C {triton} rev-parse HEAD)" = {ZEBIN}',
    ]
    assert lines[4] == (
        f"LLVM_COMMIT=$(llvm_hash of {triton}/cmake/llvm-info.json, else the content of {triton}/cmake/llvm-hash.txt)"
    )
    assert f'git -C {tmp_path}/src/llvm-project {FETCH} https://github.com/llvm/llvm-project "$LLVM_COMMIT"' in lines


def test_llvm_source_plan_with_a_checkout(tmp_path):
    fake_triton_checkout(tmp_path)
    proc = sh("build-llvm.sh", tmp_path, "--dry-run", TRITON_COMMIT=ZEBIN, LLVM_SOURCE="source")
    assert proc.returncode == 0, proc.stderr
    lines = commands(proc.stdout.splitlines())
    llvm = tmp_path / "src/llvm-project"
    prefix = tmp_path / "llvm"
    assert f"git -C {llvm} fetch --depth 1 --no-tags https://github.com/llvm/llvm-project {LLVM_AT_ZEBIN}" in lines
    assert f'test "$(git -C {llvm} rev-parse HEAD)" = {LLVM_AT_ZEBIN}' in lines
    (cmake,) = [line for line in lines if line.startswith("cmake -G Ninja")]
    for flag in (
        f"-S {llvm}/llvm",
        f"-B {llvm}/build",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DLLVM_ENABLE_ASSERTIONS=ON",
        "'-DLLVM_ENABLE_PROJECTS=mlir;lld'",
        "'-DLLVM_TARGETS_TO_BUILD=X86;NVPTX;AMDGPU;SPIRV'",
        "-DLLVM_INSTALL_UTILS=ON",
        f"-DCMAKE_INSTALL_PREFIX={prefix}",
        "-DCMAKE_C_COMPILER_LAUNCHER=ccache",
        "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
    ):
        assert flag in cmake, flag
    assert f"cmake --build {llvm}/build --target install -j 8" in lines
    assert not any("check-mlir" in line for line in lines)
    assert (
        f"printf '%s\\n' source=source triton_commit={ZEBIN} llvm_commit={LLVM_AT_ZEBIN} "
        f"> {prefix}/xpukit-llvm.txt" in lines
    )


def test_llvm_check_mlir_is_opt_in(tmp_path):
    fake_triton_checkout(tmp_path)
    proc = sh("build-llvm.sh", tmp_path, "--dry-run", TRITON_COMMIT=ZEBIN, LLVM_SOURCE="source", LLVM_CHECK="1")
    assert f"cmake --build {tmp_path}/src/llvm-project/build --target check-mlir -j 8" in proc.stdout


def test_llvm_hash_file_with_garbage_is_refused(tmp_path):
    fake_triton_checkout(tmp_path, llvm_hash="not-a-hash")
    proc = sh("build-llvm.sh", tmp_path, "--dry-run", TRITON_COMMIT=ZEBIN, LLVM_SOURCE="source")
    assert proc.returncode == 2 and "LLVM_COMMIT (from" in proc.stderr


# ---- build-triton.sh ----------------------------------------------------------------------------


def test_triton_prebuilt_plan(tmp_path):
    lines = commands(dry("build-triton.sh", tmp_path, TRITON_COMMIT=ZEBIN))
    triton, wheels = tmp_path / "src/triton", tmp_path / "wheels"
    assert f"git -C {triton} {FETCH} {TRITON_URL} {ZEBIN}" in lines
    assert f'test "$(git -C {triton} rev-parse HEAD)" = {ZEBIN}' in lines
    assert f"python3 -m pip install -r {triton}/python/requirements.txt" in lines
    assert not any("LLVM_SYSPATH" in line for line in lines)
    assert "export MAX_JOBS=8" in lines and "export TRITON_BUILD_WITH_CCACHE=true" in lines
    assert lines[-1] == f"python3 -m pip wheel --no-deps --no-build-isolation --wheel-dir {wheels} -v {triton}"


def test_triton_with_llvm_from_source(tmp_path):
    lines = commands(
        dry("build-triton.sh", tmp_path, TRITON_COMMIT=ZEBIN, LLVM_SOURCE="source", LLVM_PREFIX="/opt/llvm")
    )
    assert "export LLVM_SYSPATH=/opt/llvm" in lines
    assert "export LLVM_INCLUDE_DIRS=/opt/llvm/include" in lines
    assert "export LLVM_LIBRARY_DIR=/opt/llvm/lib" in lines
    # The LLVM is named before the wheel build starts.
    assert lines.index("export LLVM_SYSPATH=/opt/llvm") < len(lines) - 1


def test_triton_source_llvm_missing_is_refused_before_cloning(tmp_path):
    proc = sh("build-triton.sh", tmp_path, TRITON_COMMIT=ZEBIN, LLVM_SOURCE="source")
    assert proc.returncode == 2 and "has no MLIR" in proc.stderr and "build-llvm.sh" in proc.stderr
    assert not (tmp_path / "src").exists()


def test_blog_commit_builds_from_python_dir(tmp_path):
    fake_triton_checkout(tmp_path, old_layout=True)
    proc = sh("build-triton.sh", tmp_path, "--dry-run", TRITON_COMMIT=BLOG)
    assert proc.returncode == 0, proc.stderr
    lines = commands(proc.stdout.splitlines())
    assert f"git -C {tmp_path}/src/triton {FETCH} {TRITON_URL} {BLOG}" in lines
    assert lines[-1].endswith(f"-v {tmp_path}/src/triton/python")


def test_custom_repo_and_python(tmp_path):
    lines = commands(
        dry(
            "build-triton.sh",
            tmp_path,
            TRITON_COMMIT=ZEBIN,
            TRITON_REPO="https://example.org/fork.git",
            PYTHON="/opt/venv/bin/python",
        )
    )
    assert any(f"fetch --depth 1 --no-tags https://example.org/fork.git {ZEBIN}" in line for line in lines)
    assert lines[-1].startswith("/opt/venv/bin/python -m pip wheel")


def test_token_is_used_but_never_printed(tmp_path):
    token = tmp_path / "github_token"
    token.write_text("ghp_SECRET123\n")
    proc = sh("build-triton.sh", tmp_path, "--dry-run", TRITON_COMMIT=ZEBIN, GITHUB_TOKEN_FILE=str(token))
    assert proc.returncode == 0
    assert "using the GitHub token" in proc.stdout
    assert "SECRET" not in proc.stdout + proc.stderr


def test_without_token_says_anonymous(tmp_path):
    assert any("anonymous clones" in line for line in dry("build-triton.sh", tmp_path, TRITON_COMMIT=ZEBIN))


# ---- the exact-commit checkout, run for real against a local repository -------------------------


def _git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _checkout(tmp_path: Path, repo: str, commit: str, token: Path) -> subprocess.CompletedProcess[str]:
    script = f'. {SCRIPTS}/common.sh; use_github_token; git_checkout "$1" "$2" "$3"'
    return subprocess.run(
        ["bash", "-c", script, "checkout", repo, commit, str(tmp_path / "out")],
        env={**os.environ, "GITHUB_TOKEN_FILE": str(token)},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_checkout_fetches_exactly_the_commit_and_stores_no_secret(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _git("init", "-q", cwd=src)
    _git("commit", "-q", "--allow-empty", "-m", "one", cwd=src)
    first = _git("rev-parse", "HEAD", cwd=src)
    _git("commit", "-q", "--allow-empty", "-m", "two", cwd=src)  # the wanted commit is not the tip
    token = tmp_path / "token"
    token.write_text("ghp_SECRET123")
    proc = _checkout(tmp_path, f"file://{src}", first, token)
    assert proc.returncode == 0, proc.stderr
    assert _git("rev-parse", "HEAD", cwd=tmp_path / "out") == first
    assert f"verified: {tmp_path}/out is at {first}" in proc.stdout
    config = (tmp_path / "out/.git/config").read_text()
    assert "SECRET" not in config and "extraheader" not in config.lower() and "file://" not in config
    assert "SECRET" not in proc.stdout + proc.stderr
    # A rerun reuses the checkout.
    again = _checkout(tmp_path, f"file://{src}", first, token)
    assert again.returncode == 0 and "already at" in again.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_checkout_of_a_missing_commit_fails(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _git("init", "-q", cwd=src)
    _git("commit", "-q", "--allow-empty", "-m", "one", cwd=src)
    proc = _checkout(tmp_path, f"file://{src}", "0" * 40, tmp_path / "none")
    assert proc.returncode != 0


# ---- build-pytorch.sh ---------------------------------------------------------------------------


def test_torch_none(tmp_path):
    lines = dry("build-pytorch.sh", tmp_path)
    assert commands(lines) == [f"mkdir -p {tmp_path}/wheels"]
    assert any("TORCH_SOURCE=none" in line and "stays empty" in line for line in lines)


def test_torch_none_real_run_makes_an_empty_dir(tmp_path):
    proc = sh("build-pytorch.sh", tmp_path, TORCH_SOURCE="none")
    assert proc.returncode == 0 and list((tmp_path / "wheels").iterdir()) == []


def test_torch_source_plan(tmp_path):
    lines = commands(dry("build-pytorch.sh", tmp_path, TORCH_SOURCE="source", TORCH_COMMIT=TORCH))
    torch, wheels = tmp_path / "src/pytorch", tmp_path / "wheels"
    assert lines[:4] == [
        f"git init -q {torch}",
        f"git -C {torch} fetch --depth 1 --no-tags https://github.com/pytorch/pytorch {TORCH}",
        f"git -C {torch} -c advice.detachedHead=false checkout -q --detach FETCH_HEAD",
        f'test "$(git -C {torch} rev-parse HEAD)" = {TORCH}',
    ]
    assert f"git -C {torch} submodule update --init --recursive --jobs 8" in lines
    assert f"python3 -m pip install -r {torch}/requirements.txt 'cmake<4' ninja build" in lines
    for line in (
        "export USE_XCCL=1",
        "export USE_STATIC_MKL=1",
        "export USE_XPU=1",
        "export TORCH_XPU_ARCH_LIST=pvc,bmg,dg2,arl-h,mtl-h",
        "export MAX_JOBS=8",
        "export CMAKE_C_COMPILER_LAUNCHER=ccache",
        "export CMAKE_CXX_COMPILER_LAUNCHER=ccache",
    ):
        assert line in lines, line
    assert lines[-1] == f"(cd {torch} && python3 -m build --wheel --no-isolation --outdir {wheels})"


def test_torch_arch_list_is_configurable(tmp_path):
    lines = dry("build-pytorch.sh", tmp_path, TORCH_SOURCE="source", TORCH_COMMIT=TORCH, TORCH_XPU_ARCH_LIST="pvc")
    assert "export TORCH_XPU_ARCH_LIST=pvc" in lines


@pytest.mark.parametrize("arch", ["", "pvc, bmg", "pvc,,bmg", ",pvc", "pvc;rm -rf /"])
def test_torch_bad_arch_list(arch, tmp_path):
    proc = sh(
        "build-pytorch.sh",
        tmp_path,
        "--dry-run",
        TORCH_SOURCE="source",
        TORCH_COMMIT=TORCH,
        TORCH_XPU_ARCH_LIST=arch,
    )
    if arch == "":
        # Empty means "the default", like every other variable.
        assert proc.returncode == 0 and "TORCH_XPU_ARCH_LIST=pvc,bmg,dg2,arl-h,mtl-h" in proc.stdout
    else:
        assert proc.returncode == 2 and "TORCH_XPU_ARCH_LIST" in proc.stderr


def test_torch_source_needs_a_commit(tmp_path):
    proc = sh("build-pytorch.sh", tmp_path, "--dry-run", TORCH_SOURCE="source")
    assert proc.returncode == 2 and "TORCH_COMMIT is empty and TRITON_COMMIT is not set" in proc.stderr


def test_torch_wheel_without_version_names_the_pin(tmp_path):
    proc = sh("build-pytorch.sh", tmp_path, "--dry-run", TORCH_SOURCE="wheel")
    assert proc.returncode == 2
    assert "TORCH_VERSION is empty" in proc.stderr and "env/pins.toml" in proc.stderr
    assert "--torch source" in proc.stderr


def test_torch_wheel_plan(tmp_path):
    lines = commands(dry("build-pytorch.sh", tmp_path, TORCH_SOURCE="wheel", TORCH_VERSION="9.9.9+xpu"))
    assert lines[-1] == (
        "python3 -m pip download --no-deps --only-binary=:all: "
        "--index-url https://download.pytorch.org/whl/xpu "
        f"--dest {tmp_path}/wheels torch==9.9.9+xpu"
    )


def test_torch_bad_source(tmp_path):
    proc = sh("build-pytorch.sh", tmp_path, "--dry-run", TORCH_SOURCE="conda")
    assert proc.returncode == 2 and "none, wheel or source" in proc.stderr


# ---- check-ur.sh --------------------------------------------------------------------------------


def fake_oneapi(tmp_path: Path, adapters=("level_zero", "opencl"), ze=True) -> dict[str, str]:
    lib = tmp_path / "oneapi/compiler/2025.2/lib"
    lib.mkdir(parents=True)
    (tmp_path / "oneapi/compiler/latest").symlink_to("2025.2")
    (lib / "libur_loader.so.0.12.0").write_text("")
    (lib / "libur_loader.so.0").symlink_to("libur_loader.so.0.12.0")
    (lib / "libur_loader.so").symlink_to("libur_loader.so.0")
    for a in adapters:
        (lib / f"libur_adapter_{a}.so").write_text("")
    sys_lib = tmp_path / "syslib"
    sys_lib.mkdir()
    if ze:
        (sys_lib / "libze_loader.so.1.21.9").write_text("")
        (sys_lib / "libze_loader.so.1").symlink_to("libze_loader.so.1.21.9")
    return {"ONEAPI_ROOT": str(tmp_path / "oneapi"), "LD_LIBRARY_PATH": str(sys_lib), "XPUKIT_LDCONFIG": ""}


def test_check_ur_dry_run(tmp_path):
    proc = sh("check-ur.sh", tmp_path, "--dry-run", ONEAPI_ROOT="/opt/intel/oneapi")
    assert proc.returncode == 0
    assert "ls -d /opt/intel/oneapi/compiler/*/lib /opt/intel/oneapi/*/latest/lib" in proc.stdout
    assert "ldconfig -p" in proc.stdout


def test_check_ur_finds_loader_adapters_and_level_zero(tmp_path):
    proc = sh("check-ur.sh", tmp_path, **fake_oneapi(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "oneAPI compiler releases under" in out and "2025.2" in out
    assert f"ok   UR loader: {tmp_path}/oneapi/compiler/2025.2/lib/libur_loader.so (version 0.12.0)" in out
    assert "libur_adapter_level_zero.so libur_adapter_opencl.so" in out
    assert f"ok   Level Zero loader: {tmp_path}/syslib/libze_loader.so.1 (version 1.21.9)" in out


def test_check_ur_warns_without_level_zero_adapter(tmp_path):
    proc = sh("check-ur.sh", tmp_path, **fake_oneapi(tmp_path, adapters=("opencl",)))
    assert proc.returncode == 0 and "warn no Level Zero adapter" in proc.stdout


def test_check_ur_fails_without_level_zero_loader(tmp_path):
    proc = sh("check-ur.sh", tmp_path, **fake_oneapi(tmp_path, ze=False))
    assert proc.returncode == 1 and "fail Level Zero loader libze_loader.so.1 not found" in proc.stdout


def test_check_ur_fails_without_oneapi(tmp_path):
    env = {"ONEAPI_ROOT": str(tmp_path / "none"), "LD_LIBRARY_PATH": "", "XPUKIT_LDCONFIG": ""}
    proc = sh("check-ur.sh", tmp_path, **env)
    assert proc.returncode == 1
    assert "fail UR loader libur_loader.so not found" in proc.stdout and "fix:" in proc.stdout


# ---- lint ---------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="needs shellcheck (apt-get install shellcheck)")
def test_scripts_are_shellcheck_clean():
    files = [str(p) for p in sorted(SCRIPTS.glob("*.sh"))]
    proc = subprocess.run(["shellcheck", "-x", *files], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_scripts_are_executable_and_strict(script):
    path = SCRIPTS / script
    assert os.access(path, os.X_OK)
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in text


@pytest.mark.parametrize("script", ["build-triton.sh", "build-llvm.sh"])
def test_ca_bundle_secret_is_trusted_when_present(script, tmp_path):
    bundle = tmp_path / "ca_bundle"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    proc = sh(script, tmp_path, "--dry-run", TRITON_COMMIT=ZEBIN, LLVM_SOURCE="source", CA_BUNDLE_FILE=str(bundle))
    assert proc.returncode == 0 and f"trusting the CA bundle at {bundle}" in proc.stdout


# ---- pins read from the Triton checkout at build time (issue 30) ---------------------------------

LLVM_AT_CURRENT = "941a04e69ee8fe4c7a162b2f1e215aa8df867534"  # cmake/llvm-info.json's llvm_hash at upstream main


def _llvm_info(src: Path, llvm_hash: str) -> None:
    """cmake/llvm-info.json as upstream writes it since mid-2026 (llvm_hash, build_number, sha256sum)."""
    (src / "cmake").mkdir(parents=True, exist_ok=True)
    (src / "cmake/llvm-info.json").write_text(
        json.dumps({"llvm_hash": llvm_hash, "build_number": 1, "sha256sum": {"ubuntu-x64": "0" * 64}})
    )


def test_llvm_info_json_is_read_and_wins_over_the_old_file(tmp_path):
    fake_triton_checkout(tmp_path)  # llvm-hash.txt with the zebin commit's hash
    _llvm_info(tmp_path / "src/triton", LLVM_AT_CURRENT)
    proc = sh("build-llvm.sh", tmp_path, "--dry-run", TRITON_COMMIT=ZEBIN, LLVM_SOURCE="source")
    assert proc.returncode == 0, proc.stderr
    assert f"git -C {tmp_path}/src/llvm-project {FETCH} https://github.com/llvm/llvm-project {LLVM_AT_CURRENT}" in (
        proc.stdout
    )
    assert f"pins LLVM {LLVM_AT_CURRENT} (read from its checkout)" in proc.stdout


def test_a_known_llvm_pin_must_match_the_checkout(tmp_path):
    _llvm_info(tmp_path / "src/triton", LLVM_AT_CURRENT)
    (tmp_path / "src/triton/setup.py").write_text("")
    ok = sh("build-triton.sh", tmp_path, "--dry-run", TRITON_COMMIT=ZEBIN, LLVM_COMMIT=LLVM_AT_CURRENT)
    assert ok.returncode == 0 and f"downloads LLVM {LLVM_AT_CURRENT}" in ok.stdout, ok.stderr
    bad = sh("build-triton.sh", tmp_path, "--dry-run", TRITON_COMMIT=ZEBIN, LLVM_COMMIT=LLVM_AT_ZEBIN)
    assert bad.returncode == 2
    assert f"pins LLVM {LLVM_AT_CURRENT}, but env/pins.toml records {LLVM_AT_ZEBIN}" in bad.stderr
    assert "xpu.triton.llvm_pins" in bad.stderr and "Traceback" not in bad.stderr


def test_a_checkout_without_any_llvm_pin_is_refused(tmp_path):
    (tmp_path / "src/triton").mkdir(parents=True)
    proc = sh("build-llvm.sh", tmp_path, "--dry-run", TRITON_COMMIT=ZEBIN, LLVM_SOURCE="source")
    assert proc.returncode == 2 and "neither cmake/llvm-info.json nor cmake/llvm-hash.txt" in proc.stderr


def _upstream_like(tmp_path: Path, torch_pin: str | None) -> tuple[str, str]:
    """A real git repository shaped like upstream's at one commit (the pin files only)."""
    src = tmp_path / "upstream"
    src.mkdir()
    _git("init", "-q", cwd=src)
    if torch_pin is not None:
        (src / ".github/pins").mkdir(parents=True)
        (src / ".github/pins/pytorch.txt").write_text(torch_pin + "\n")
    _llvm_info(src, LLVM_AT_CURRENT)
    _git("add", "-A", cwd=src)
    _git("commit", "-q", "-m", "pins", cwd=src)
    return f"file://{src}", _git("rev-parse", "HEAD", cwd=src)


def _build_pytorch_from_source(tmp_path, repo, commit):
    """build-pytorch.sh from source for Triton ``commit`` of ``repo`` (pins read into tmp_path/pins)."""
    return sh(
        "build-pytorch.sh",
        tmp_path,
        TORCH_SOURCE="source",
        TRITON_REPO=repo,
        TRITON_COMMIT=commit,
        TRITON_PINS_SRC=str(tmp_path / "pins"),
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_torch_pin_is_read_from_the_triton_commit_itself(tmp_path):
    """A real fetch of a local repository's commit, then its .github/pins/pytorch.txt read; the run
    then stops at the oneAPI check (no icpx here), after the pin was read."""
    own_pin = "23b1588b32ea2d46410793347d635017fdc49c75"
    repo, commit = _upstream_like(tmp_path, own_pin)
    proc = _build_pytorch_from_source(tmp_path, repo, commit)
    assert f"Triton {commit} pins PyTorch {own_pin} (read from its" in proc.stdout, proc.stderr
    assert TORCH not in proc.stdout + proc.stderr  # the zebin commit's pin is never borrowed
    assert proc.returncode == 2 and "icpx" in proc.stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_triton_commit_without_a_torch_pin_is_refused(tmp_path):
    repo, commit = _upstream_like(tmp_path, None)
    proc = _build_pytorch_from_source(tmp_path, repo, commit)
    assert proc.returncode == 2 and "no .github/pins/pytorch.txt" in proc.stderr
    assert "--torch wheel or --torch none" in proc.stderr


def test_torch_pin_plan_reads_it_at_build_time(tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    lines = commands(
        dry(
            "build-pytorch.sh",
            tmp_path,
            TORCH_SOURCE="source",
            TRITON_COMMIT=commit,
            TRITON_PINS_SRC=str(tmp_path / "src/pins"),
        )
    )
    pins = tmp_path / "src/pins"
    assert f"git -C {pins} {FETCH} {TRITON_URL} {commit}" in lines
    assert f"TORCH_COMMIT=$(cat {pins}/.github/pins/pytorch.txt)" in lines
    assert f'git -C {tmp_path}/src/pytorch {FETCH} https://github.com/pytorch/pytorch "$TORCH_COMMIT"' in lines
