"""The host kit's settings, CA trust, build-log diagnosis and bad input, as a user meets them."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host import ui
from xpukit.host.image import build, buildlog, plan, trust
from xpukit.host.versions import pins
from xpukit.runtime.image import manifest

pytestmark = pytest.mark.unit
ROOT = layout.REPO_ROOT
SUDO_SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's sudoers default


def invoke(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "XPUKIT_PROFILE": "", "XPUKIT_CA_BUNDLE": "", **(env or {})}
    full_env.pop("CI", None)
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False
    )


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr
    assert len(errors[0]) <= 200, errors[0]
    return errors[0]


def pem(path: Path, marker: str) -> Path:
    path.write_text(f"# {marker}\n-----BEGIN CERTIFICATE-----\n")
    return path


# ---------------------------------------------------------------- CA bundle: auto by default


def test_ca_auto_order_ssl_cert_file_requests_pip_os(tmp_path):
    ssl, req, pipc, os_bundle = (pem(tmp_path / f"{n}.pem", n) for n in ("ssl", "req", "pip", "os"))
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\ncert = {pipc}\n")
    every = {"SSL_CERT_FILE": str(ssl), "REQUESTS_CA_BUNDLE": str(req)}
    resolve = lambda env: trust.resolve_ca_bundle("auto", env, [conf], (str(os_bundle),))  # noqa: E731
    assert resolve(every) == trust.CaBundle(str(ssl), "auto: SSL_CERT_FILE")
    assert resolve({"REQUESTS_CA_BUNDLE": str(req)}).path == str(req)
    assert resolve({}) == trust.CaBundle(str(pipc), "auto: pip's cert setting")
    assert resolve({"PIP_CERT": str(req)}).path == str(req)  # pip's own variable beats its config file
    conf.write_text("[global]\ntimeout = 5\n")
    assert resolve({}) == trust.CaBundle(str(os_bundle), "auto: the OS trust store")
    # A variable naming a missing file is skipped, and the line says so.
    skipped = resolve({"SSL_CERT_FILE": str(tmp_path / "gone.pem")})
    assert skipped.path == str(os_bundle) and "skipped SSL_CERT_FILE" in skipped.source
    nothing = trust.resolve_ca_bundle("auto", {}, [], (str(tmp_path / "no-os.pem"),))
    assert nothing.path == "" and "no CA bundle" in nothing.describe()


def test_ca_none_and_path(tmp_path):
    assert trust.resolve_ca_bundle("none", {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}).path == ""
    given = pem(tmp_path / "corp.pem", "corp")
    assert trust.resolve_ca_bundle(str(given), {}) == trust.CaBundle(str(given), "--ca-bundle")
    with pytest.raises(XpukitError, match="does not exist"):
        trust.resolve_ca_bundle(str(tmp_path / "none.pem"), {})


def test_pip_config_files_follow_pip_precedence(tmp_path):
    home = tmp_path / "home"
    files = trust.pip_config_files({}, home, prefix=str(tmp_path / "venv"))
    assert files.index(Path("/etc/pip.conf")) < files.index(home / ".config" / "pip" / "pip.conf")
    assert files[-1] == tmp_path / "venv" / "pip.conf"
    assert trust.pip_config_files({"PIP_CONFIG_FILE": "/x.conf"}, home) == [Path("/x.conf")]


def _build_dry_run(env: dict[str, str], *flags: str) -> tuple[list[str], str]:
    result = invoke("build", "--profile", "cpu", "--dry-run", *flags, env=env)
    assert result.returncode == 0, result.stderr
    line = [ln for ln in result.stdout.splitlines() if " build " in ln][-1]
    return shlex.split(line), result.stdout


def test_build_trusts_the_hosts_bundle_by_default(tmp_path):
    """No --ca-bundle: the build's secret is SSL_CERT_FILE's bundle, and one line says where it came from."""
    canary = pem(tmp_path / "host+canary.pem", "canary")
    cmd, out = _build_dry_run({"SSL_CERT_FILE": str(canary)})
    assert cmd[cmd.index("--secret") + 1] == f"id=ca_bundle,src={canary}"
    assert f"xpukit: ca-bundle: {canary} (auto: SSL_CERT_FILE)" in out
    cmd, out = _build_dry_run({"SSL_CERT_FILE": str(canary), "XPUKIT_CA_BUNDLE": "none"})
    assert "--secret" not in cmd and "xpukit: ca-bundle: none" in out
    cmd, _ = _build_dry_run({"SSL_CERT_FILE": str(canary)}, "--ca-bundle", "none")
    assert "--secret" not in cmd


def test_proxy_settings_reach_the_build_by_name_only():
    cmd, _ = _build_dry_run({"HTTPS_PROXY": "http://user:secret@proxy.example:3128"})
    assert cmd[cmd.index("HTTPS_PROXY") - 1] == "--build-arg"
    assert not any("secret@" in part for part in cmd)


# ---------------------------------------------------------------- build failures, diagnosed


def _real_log(cmd: list[str], env: dict[str, str] | None = None) -> list[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False, env=env)
    assert result.returncode != 0
    return (result.stdout + result.stderr).splitlines()


def test_diagnose_a_real_certificate_failure(tmp_path):
    """Python's TLS client trusting one real CA that did not sign PyPI's certificate (nor any proxy's):
    the genuine CERTIFICATE_VERIFY_FAILED pip prints inside a build that lacks the proxy's CA."""
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    if not system.is_file():
        pytest.skip("no OS CA bundle to take one CA from")
    text = system.read_text()
    one_ca = text[text.index("-----BEGIN CERTIFICATE-----") : text.index("-----END CERTIFICATE-----") + 25]
    (tmp_path / "one.pem").write_text(one_ca + "\n")
    code = (
        "import ssl, sys, urllib.request\n"
        "ctx = ssl.create_default_context(cafile=sys.argv[1])\n"
        "urllib.request.urlopen('https://pypi.org/simple/six/', context=ctx, timeout=30)\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "one.pem")], capture_output=True,
                            text=True, timeout=120, check=False)  # fmt: skip
    lines = (result.stdout + result.stderr).splitlines()
    if result.returncode == 0 or (buildlog.diagnose(lines) and "DNS" in buildlog.diagnose(lines).cause):
        pytest.skip(f"PyPI is not reachable or trusted this CA: {lines[-1:] or 'ok'}")
    found = buildlog.diagnose(lines, "none")
    assert found and "TLS certificate" in found.cause and "--ca-bundle" in found.fix, lines[-3:]


def test_diagnose_a_real_missing_version(tmp_path):
    (tmp_path / "empty").mkdir()
    cmd = [sys.executable, "-m", "pip", "download", "--isolated", "--no-index", "--find-links"]
    cmd += [str(tmp_path / "empty"), "-d", str(tmp_path), "xpukit-no-such-package==9.9"]
    found = buildlog.diagnose(_real_log(cmd))
    assert found and "xpukit-no-such-package==9.9" in found.cause and "env/pins.toml" in found.fix


def test_diagnose_a_real_dns_failure(tmp_path):
    cmd = [sys.executable, "-m", "pip", "download", "--isolated", "--retries", "1", "--timeout", "10", "-d"]
    cmd += [str(tmp_path), "--index-url", "https://xpukit-no-such-host.invalid/simple", "six"]
    found = buildlog.diagnose(_real_log(cmd))
    assert found and "proxy or DNS" in found.cause and "HTTPS_PROXY" in found.fix


def test_diagnose_a_real_full_disk():
    """/dev/full answers every write with ENOSPC, the error a full Docker data-root gives."""
    found = buildlog.diagnose(_real_log(["dd", "if=/dev/zero", "of=/dev/full", "count=1"]))
    assert found and found.cause == "no space left on device" and "invoke clean" in found.fix


def test_diagnose_apt_and_buildkit_prefixes():
    """apt's wording (as apt-get prints it, behind BuildKit's step prefix): no apt run needed to know it."""
    found = buildlog.diagnose(["#9 2.1 E: Version '9.9' for 'python3' was not found"])
    assert found and found.cause == "package python3=9.9 is not available" and found.evidence.startswith("E: ")
    assert buildlog.diagnose(["#9 DONE 0.1s", "all fine"]) is None


# ---------------------------------------------------------------- settings and invoke.yaml


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("xpukit: [1, 2\n", "not valid YAML at line"),
        ("- a\n- b\n", "must be a mapping"),
        ("xpukit: [1, 2]\n", "xpukit: must be a mapping of settings"),
        ("xpukit:\n  profil: cpu\n", "unknown setting xpukit.profil"),
        ("xpukit:\n  profile: {a: 1}\n", "xpukit.profile must be a plain value"),
    ],
)
def test_broken_invoke_yaml_is_one_line(tmp_path, text, expected):
    (tmp_path / "tasks.py").write_bytes((ROOT / "tasks.py").read_bytes())
    (tmp_path / "invoke.yaml").write_text(text)
    result = invoke("build", "--dry-run", env={"PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    line = one_line_error(result)
    assert expected in line and "invoke.yaml" in line


def test_invoke_yaml_not_utf8(tmp_path):
    (tmp_path / "tasks.py").write_bytes((ROOT / "tasks.py").read_bytes())
    (tmp_path / "invoke.yaml").write_bytes(b"xpukit:\n  image: caf\xe9\n")
    line = one_line_error(invoke("build", "--dry-run", env={"PYTHONPATH": str(ROOT)}, cwd=tmp_path))
    assert "not UTF-8" in line


# ---------------------------------------------------------------- bad input: one line, non-zero


def test_num_warps_not_a_number():
    line = one_line_error(invoke("compile", "examples/kernels.py:scale_kernel", "--num-warps", "abc", "--dry-run"))
    assert "--num-warps 'abc' is not a whole number" in line
    line = one_line_error(invoke("compile", "examples/kernels.py:scale_kernel", "--num-warps", "3", "--dry-run"))
    assert "not a power of two" in line


def test_out_is_a_file_or_cannot_be_written(tmp_path):
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    line = one_line_error(invoke("compile", "examples/kernels.py:scale_kernel", "--out", str(a_file), "--dry-run"))
    assert "is a file, not a folder" in line
    under_file = one_line_error(invoke("compile", "examples/kernels.py:scale_kernel", "--out", f"{a_file}/sub"))
    assert "is a file" in under_file
    # /proc refuses new folders even to root (a chmod'ed folder would not stop root).
    line = one_line_error(invoke("compile", "examples/kernels.py:scale_kernel", "--out", "/proc/xpukit-out"))
    assert "--out /proc/xpukit-out" in line and "write" in line
    assert not Path("/proc/xpukit-out").exists()


def test_no_engine_error_is_short(tmp_path):
    line = one_line_error(invoke("build", "--profile", "cpu", env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"}))
    assert "no Docker engine answers" in line and "DOCKER_HOST" in line


def test_base_dry_run_under_sudos_path():
    """`sudo invoke base` resets PATH to secure_path: the venv's invoke still runs and finds its tools."""
    result = invoke("base", "--debootstrap", "--dry-run", env={"PATH": SUDO_SECURE_PATH})
    assert result.returncode == 0, result.stderr
    assert "debootstrap --variant=minbase" in result.stdout


def test_base_finds_debootstrap_outside_a_users_path():
    """debootstrap lives in /usr/sbin, which a user's PATH (kept by `sudo -E` or `sudo env PATH=...`) lacks."""
    from xpukit.host.image import base

    if not Path("/usr/sbin/debootstrap").exists():
        pytest.skip("debootstrap is not installed in /usr/sbin here")
    assert base.find_debootstrap(path="/usr/bin:/bin") == "/usr/sbin/debootstrap"


def test_dry_runs_print_the_real_tag(tmp_path):
    """test, compile, zebin-info, demo-ur and shell name the tag `invoke build` would build, never a placeholder."""
    cmd, _ = _build_dry_run({})
    tag = cmd[cmd.index("-t") + 1]
    zebin = tmp_path / "k.zebin"
    zebin.write_bytes(b"\x7fELF")
    runs = {
        "test": ["test", "--where", "container", "--profile", "cpu", "--dry-run"],
        "compile": [
            "compile",
            "examples/kernels.py:scale_kernel",
            "--where",
            "container",
            "--profile",
            "cpu",
            "--out",
            str(tmp_path / "out"),
            "--dry-run",
        ],
        "zebin-info": ["zebin-info", str(zebin), "--where", "container", "--profile", "cpu", "--dry-run"],
        "demo-ur": ["demo-ur", "--where", "container", "--profile", "cpu", "--dry-run"],
        "shell": ["shell", "--profile", "cpu", "--dry-run"],
    }
    for name, args in runs.items():
        result = invoke(*args)
        assert result.returncode == 0, (name, result.stderr)
        run_line = [ln for ln in result.stdout.splitlines() if " run " in ln][-1]
        assert f" {tag} " in run_line, (name, run_line)
        assert "<content>" not in result.stdout
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


# ---------------------------------------------------------------- Ctrl-C


def test_ctrl_c_while_waiting_for_the_engine(tmp_path):
    """An engine socket that accepts and never answers; Ctrl-C (SIGINT) in the middle of the ping."""
    sock_path = tmp_path / "silent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))
    server.listen(8)  # connections queue in the kernel; nobody answers them
    env = {**os.environ, "DOCKER_HOST": f"unix://{sock_path}", "XPUKIT_PROFILE": "cpu"}
    env.pop("CI", None)
    proc = subprocess.Popen([sys.executable, "-m", "invoke", "build"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        time.sleep(4)  # past startup, into the engine ping (which would wait minutes)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        server.close()
    assert proc.returncode == 130, err
    assert "Traceback" not in err + out
    assert err.strip().splitlines() == ["xpukit: interrupted"] or err.strip().endswith("xpukit: interrupted"), err


# ---------------------------------------------------------------- the manifest against the pins


def test_manifest_mismatches_name_each_difference():
    pins_part = {"python": "3.11.2", "triton_source": "pypi", "triton": "3.3.0b1", "ur_source": "pypi",
                 "ur": "2025.3.3", "ocloc": "22.43.24595.41-1", "pypi": "numpy==2.4.6 PyYAML==6.0.4"}  # fmt: skip
    good = {
        "python": "3.11.2",
        "triton": "3.3.0b1",
        "ocloc": {"package_version": "22.43.24595.41-1"},
        "ur_loader": {"release": "2025.3.3"},
        "pypi": {"numpy": "2.4.6", "PyYAML": "6.0.4"},
        "pins": pins_part,
    }
    assert manifest.mismatches(good) == []
    bad = {**good, "triton": "3.4.0", "pypi": {"numpy": "2.3.0", "PyYAML": "6.0.4"}, "ur_loader": {"release": ""}}
    problems = manifest.mismatches(bad)
    assert "triton pinned 3.3.0b1, installed 3.4.0" in problems
    assert "numpy pinned 2.4.6, installed 2.3.0" in problems
    assert any(p.startswith("UR pinned 2025.3.3") for p in problems)


# ---------------------------------------------------------------- targets: one definition


def test_targets_split_and_aliases():
    from xpukit import targets

    assert targets.split_targets(["pvc", "dg2, bmg", "acm-g10"]) == ["pvc", "acm-g10", "bmg"]
    assert targets.split_targets("dg2-g10") == ["acm-g10"] and targets.preset("dg2").name == "acm-g10"
    # Triton's own short name for the same part, from the architecture id.
    assert targets.TRITON_ARCH_NAME[targets.PRESETS["acm-g10"].architecture] == "dg2"
    with pytest.raises(XpukitError, match="no target given"):
        targets.split_targets([" , "])
    with pytest.raises(XpukitError, match="unknown target 'gfx90a'"):
        targets.preset("gfx90a")


def test_target_is_repeatable_and_takes_aliases():
    result = invoke("compile", "examples/kernels.py:scale_kernel", "--target", "pvc", "--target", "dg2,bmg",
                    "--where", "container", "--dry-run")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "--target pvc,acm-g10,bmg " in result.stdout.splitlines()[-1]


def test_a_failed_build_ends_in_one_diagnosed_line(tmp_path, capfd):
    """plan.run_build with a command that really fails the way a build step does (pip asked for a
    version its index lacks): the log streams through, then one error names the cause and the fix."""
    profile = pins.load().profile("cpu")
    (tmp_path / "empty").mkdir()
    failing = [sys.executable, "-m", "pip", "download", "--isolated", "--no-index", "--find-links"]
    failing += [str(tmp_path / "empty"), "-d", str(tmp_path), "numpy==0.0.1"]
    build_plan = build.BuildPlan("cpu", ("xpukit-test:cpu-x", "xpukit-test:cpu"), {}, failing, {}, ())
    with pytest.raises(XpukitError) as info:
        plan.run_build(plan.ImagePlan(profile, "base", build_plan, "none"))
    assert "No matching distribution found for numpy==0.0.1" in capfd.readouterr().out  # the log, kept above
    line = ui.error_line(info.value)
    assert "package numpy==0.0.1 is not available" in line and "env/pins.toml" in line and len(line) <= 200


EDITS = ["xpukit/runtime/offline/zebin.py", "examples/kernels.py", "tests/conftest.py", "env/pins.toml"]


@pytest.mark.parametrize("edited", EDITS)
def test_the_content_tag_covers_every_file_the_image_copies(tmp_path, edited):
    """One tag, one image: editing any input the Dockerfile copies changes the content tag."""
    args = build.build_args(pins.load().profile("cpu"), "base:1")
    copy = build.copy_context(ROOT, tmp_path / "ctx")
    assert build.content_hash(copy, args) == build.content_hash(ROOT, args)
    (copy / edited).write_text((copy / edited).read_text() + "\n# edited\n")
    assert build.content_hash(copy, args) != build.content_hash(ROOT, args)
    # Every path the Dockerfile COPYs from the context is one the hash reads.
    copied = {line.split()[1].split("/")[0] for line in (ROOT / "Dockerfile").read_text().splitlines()
              if line.startswith("COPY ") and "--from" not in line}  # fmt: skip
    assert copied <= set(build.CONTENT_PATHS), copied - set(build.CONTENT_PATHS)


def test_cli_probes_are_remembered_per_binary(tmp_path, monkeypatch):
    """`docker --version` and `docker buildx version` run once per CLI binary, not at every task's
    start: a second probe reads the cache; a replaced binary (new size or mtime) is probed again; a
    missing buildx plugin is never remembered (installing it later is found)."""
    from xpukit.host import build_cli

    calls = tmp_path / "calls"
    cli = tmp_path / "docker"

    def write_cli(version: str, buildx: bool) -> None:
        cli.write_text(
            f'#!/bin/sh\necho "$@" >> {calls}\n'
            f'[ "$1" = "--version" ] && echo "Docker version {version}, build x" && exit 0\n'
            f'[ "$1" = "buildx" ] && {"exit 0" if buildx else "exit 1"}\nexit 2\n'
        )
        cli.chmod(0o755)

    monkeypatch.setenv("XPUKIT_CACHE_DIR", str(tmp_path / "cache"))
    write_cli("28.2.2", buildx=False)
    for _ in range(2):
        assert build_cli.probe_cli(str(cli))[0] is None  # >= 23 without buildx
    assert calls.read_text().splitlines() == ["--version", "buildx version", "buildx version"]
    write_cli("28.2.20", buildx=True)  # a new binary: other size
    calls.unlink()
    for _ in range(2):
        found = build_cli.probe_cli(str(cli))[0]
        assert found is not None and found.version == "28.2.20" and found.via_buildx
    assert calls.read_text().splitlines() == ["--version", "buildx version"]
    (tmp_path / "cache" / build_cli.PROBE_CACHE).write_text("not json")  # a broken cache is probed around
    assert build_cli.probe_cli(str(cli))[0] is not None
