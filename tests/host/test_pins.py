"""env/pins.toml: the real file loads, each broken rule names the file, the key and the rule."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from xpukit import layout
from xpukit.host.versions import lock, pins

pytestmark = pytest.mark.unit
REAL = pins.DEFAULT_PINS.read_text()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pins.toml"
    path.write_text(text)
    return path


def test_real_pins_load_with_both_profiles():
    loaded = pins.load()
    assert set(loaded.profiles) == {"cpu", "xpu"}
    cpu = loaded.profile("cpu")
    assert cpu["triton"] == {**cpu["triton"], "source": "pypi", "package": "triton-xpu", "version": "3.3.0b1"}
    assert cpu["ur"]["version"] == "2026.2.0"
    assert "triton-xpu==3.3.0b1" in cpu.pypi_requirements()
    xpu = loaded.profile("xpu")
    assert xpu["triton"]["commit"] == "9e237132e02d6e813836ad6a7137bd275fc0a7cd"
    assert xpu["torch"]["commit"] == "a47976948863783de4a5b27dc9f05d8be916d559"


def test_empty_digest_warns_not_pinned_by_digest():
    cpu = pins.load().profile("cpu")
    if cpu.base.digest:
        pytest.skip("the cpu base is pinned by digest in this checkout")
    assert any("not pinned by digest" in w for w in cpu.warnings)


@pytest.mark.parametrize("profile", ["cpu", "xpu"])
def test_lock_files_match_the_pins(profile):
    """A stale lock would install something other than the pins say."""
    loaded = pins.load().profile(profile)
    assert lock.check_lock_matches(loaded, pins.lock_path(profile)) == []
    text = pins.lock_path(profile).read_text()
    # Every requirement in a lock carries at least one hash.
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    assert blocks and all("--hash=sha256:" in b for b in blocks if "==" in b)


def test_the_dpnp_layer_lock_holds_every_package_of_its_profile_at_its_version():
    """Installed on top of the image, the layer adds packages and never moves one the image has."""
    real = pins.load()
    layer = real.layers["dpnp"]
    base = lock.locked_versions(pins.lock_path(layer["profile"]))
    locked = lock.locked_versions(pins.layer_lock_path(layer["profile"], "dpnp"))
    assert {name: locked.get(name) for name in base} == base
    assert {"dpnp": "0.20.0", "dpctl": "0.22.1"}.items() <= locked.items()
    assert real.layer_requirements("dpnp") == ["dpnp==0.20.0", "dpctl==0.22.1"]
    with pytest.raises(pins.PinsError, match="no layer 'nope'"):
        real.layer_requirements("nope")


BROKEN = [
    (
        'commit = "9e237132e02d6e813836ad6a7137bd275fc0a7cd"  # upstream',
        'commit = "9e23713"  # upstream',
        "xpu.triton.commit",
        "40 lowercase hex",
    ),
    ('digest = ""  # unknown here', 'digest = "sha256:1234"  # unknown here', "cpu.base.digest", "64 hex"),
    ('triton-xpu"\nversion = "3.3.0b1"', 'triton-xpu"\nversion = ">=3.3"', "cpu.triton.version", "not exact"),
    ('numpy = "2.4.6"\npyelftools', 'numpy = "2.*"\npyelftools', "cpu.pypi.numpy", "not exact"),
    ('dpnp = "0.20.0"', 'dpnp = ">=0.20"', "layers.dpnp.pypi.dpnp", "not exact"),
    (
        'profile = "cpu"\n\n[layers.dpnp.pypi]',
        'profile = "xpu"\n\n[layers.dpnp.pypi]',
        "layers.dpnp.profile",
        "not one of",
    ),
    ('source = "debian-folder"', 'source = "ppa"', "cpu.ocloc.source", "not one of"),
    (
        'libigc2 = { version = "2.40.14-1", sha256 = "5ccd',
        'libigc2 = { version = "2.40.14-1", sha256 = "sha256:5ccd',
        "cpu.ocloc.debs.libigc2.sha256",
        "not 64 lowercase hex",
    ),
    ('mirror = "http://deb.debian.org/debian"', 'mirror = "deb.debian.org"', "cpu.ocloc.mirror", "http(s) URL"),
]


@pytest.mark.parametrize(("old", "new", "key", "rule"), BROKEN, ids=[b[2] for b in BROKEN])
def test_each_broken_rule_is_named(tmp_path, old, new, key, rule):
    assert old in REAL, f"fixture out of date: {old!r}"
    path = write(tmp_path, REAL.replace(old, new, 1))
    with pytest.raises(pins.PinsError) as info:
        pins.load(path)
    message = info.value.one_line()
    assert message.startswith(f"{path}: {key}: ") and rule in message and f"(fix: edit {key} there)" in message


def test_missing_key_is_named(tmp_path):
    path = write(tmp_path, REAL.replace('package = "intel-ocloc"\n', "", 1))
    with pytest.raises(pins.PinsError, match=r"cpu\.ocloc\.package: missing key"):
        pins.load(path)


def test_every_compiler_deb_is_pinned_with_its_sha256(tmp_path):
    """A .deb of the compiler folder without its SHA-256 is refused: the build checks each one before
    unpacking it, so an unknown hash is no pin at all (and is never invented)."""
    cpu = pins.load().profile("cpu")["ocloc"]
    assert cpu["source"] == "debian-folder" and {"intel-ocloc", "libigc2", "libigc2-tools"} <= set(cpu["debs"])
    assert all(re.fullmatch(r"[0-9a-f]{64}", deb["sha256"]) for deb in cpu["debs"].values())
    path = write(tmp_path, REAL.replace('libigc2 = { version = "2.40.14-1"', 'libigc2 = { version = "2.40.*"', 1))
    with pytest.raises(pins.PinsError, match=r"cpu\.ocloc\.debs\.libigc2\.version: version '2.40.\*' is not exact"):
        pins.load(path)
    path = write(tmp_path, REAL.replace(', sha256 = "5ccd', ', sha255 = "5ccd', 1))
    with pytest.raises(pins.PinsError, match=r"cpu\.ocloc\.debs\.libigc2\.sha255: unknown key.*sha256"):
        pins.load(path)
    path = write(
        tmp_path,
        REAL.replace('sha256 = "5ccd335c0427ece223409aafa83e7fbf0980663015dd31cf0bbd4268bb7b4831"', 'sha256 = ""', 1),
    )
    with pytest.raises(pins.PinsError, match=r"cpu\.ocloc\.debs\.libigc2\.sha256: must not be empty"):
        pins.load(path)


def test_the_ocloc_version_is_the_pinned_debs(tmp_path):
    """ocloc.version (the manifest's check, the docs' table) and the .deb the folder is made of agree."""
    path = write(
        tmp_path, REAL.replace('version = "26.27.39122.14-1"\nsuite', 'version = "26.27.39122.15-1"\nsuite', 1)
    )
    with pytest.raises(pins.PinsError, match=r"cpu\.ocloc\.version: '26.27.39122.15-1' differs from debs"):
        pins.load(path)
    no_ocloc = re.sub(r"\nintel-ocloc = \{[^}]*\}", "", REAL, count=1)
    with pytest.raises(pins.PinsError, match=r"cpu\.ocloc\.debs: must pin intel-ocloc"):
        pins.load(write(tmp_path, no_ocloc))
    xpu_debs = REAL.replace('[xpu.ocloc]\nsource = "intel-gpu-repo"', '[xpu.ocloc]\nsource = "apt"', 1).replace(
        "[xpu.triton]", '[xpu.ocloc.debs]\nx = { version = "1", sha256 = "' + "0" * 64 + '" }\n\n[xpu.triton]', 1
    )
    with pytest.raises(pins.PinsError, match=r"xpu\.ocloc\.debs: only the debian-folder source reads it"):
        pins.load(write(tmp_path, xpu_debs))


def test_missing_profile_table_is_named(tmp_path):
    start = REAL.index("[xpu]")
    end = REAL.index("[host]")
    path = write(tmp_path, REAL[:start] + REAL[end:])
    with pytest.raises(pins.PinsError, match=r"xpu: missing profile table"):
        pins.load(path)


def test_unknown_profile_table_and_request(tmp_path):
    path = write(tmp_path, REAL + '\n[gpu]\ndescription = "x"\n')
    with pytest.raises(pins.PinsError, match=r"gpu: unknown key"):
        pins.load(path)
    with pytest.raises(pins.PinsError, match=r"no profile 'gpu'.*cpu, xpu"):
        pins.load().profile("gpu")


def test_not_toml_and_absent_file(tmp_path):
    with pytest.raises(pins.PinsError, match="not valid TOML"):
        pins.load(write(tmp_path, "[cpu\n"))
    with pytest.raises(pins.PinsError, match="no such pins file"):
        pins.load(tmp_path / "absent.toml")


def test_fill_digests_touches_only_the_digest_line(tmp_path):
    path = write(tmp_path, REAL)
    digest = "sha256:" + "ab" * 32
    lock.fill_digests(path, {"cpu": digest})
    loaded = pins.load(path)
    assert loaded.profile("cpu").base.digest == digest
    assert loaded.profile("cpu").base_reference.endswith(f":bookworm-slim@{digest}")
    assert loaded.profile("xpu").base.digest == "" and "@" not in loaded.profile("xpu").base_reference
    assert path.read_text().replace(f'"{digest}"', '""', 1) == REAL


def test_resolve_digest_never_guesses():
    assert lock.resolve_digest("debian:bookworm-slim", lambda ref: (_ for _ in ()).throw(OSError("offline"))) is None
    assert lock.resolve_digest("debian:bookworm-slim", lambda ref: "latest") is None
    good = "sha256:" + "0f" * 32
    assert lock.resolve_digest("debian:bookworm-slim", lambda ref: good) == good


def test_versions_stated_in_code_agree_with_the_pins():
    """Versions that must live in code (lock targets, the UR prototypes bound per release) are checked
    against env/pins.toml, so the two cannot drift apart silently."""
    from xpukit.runtime.ur import _api

    loaded = pins.load()
    for name in pins.PROFILES:
        profile = loaded.profile(name)
        target = lock.lock_target(name, profile)
        # The lock's python comes from the pins only: python's series, or python_series (xpu).
        series = ".".join(profile["python"].split(".")[:2]) or profile["python_series"]
        assert target[target.index("--python-version") + 1] == series, name
    ur = loaded.profile("cpu")["ur"]
    matrix_lines = {".".join(v.split(".")[:2]) for v in ur["matrix"]}
    assert matrix_lines == set(_api.SUPPORTED_RELEASES), "every bound UR release is tested, and only those"
    assert ".".join(ur["version"].split(".")[:2]) in _api.SUPPORTED_RELEASES


# Each bad input from issue 10, written the way a person would: (edit, key named, rule named, fix named).
STRICT = [
    ("cpu = 1", "cpu", "must be a table, got integer", "[cpu] table"),
    ("variants = zebin", "xpu.triton.variants", "must be a table of", "[xpu.triton.variants]"),
    ("pyton", "cpu.pyton", "unknown key", "did you mean 'python'"),
    ("tag digest", "cpu.base.tag", "is a digest, not a tag", "cpu.base.digest"),
    ("image with tag", "cpu.base.image", "not an image repository name", "cpu.base.tag"),
    ("numpy = 2", "cpu.pypi.numpy", "must be a string, got integer", "quote it"),
    ("matrix = string", "cpu.ur.matrix", "must be an array of strings", "cpu.ur.matrix = ["),
    ("commit holds digest", "xpu.torch.commit", "is a digest, not a commit", "base.digest"),
    ("unknown nested", "cpu.ocloc.verison", "unknown key", "did you mean 'version'"),
    ("unknown far", "cpu.ur.zzz", "unknown key", "[cpu.ur] takes: source, version, packages, matrix"),
    ("schema string", "schema", "must be the integer 1", "schema = 1"),
    ("variant commit short", "xpu.triton.variants.blog", "40 lowercase hex", "edit"),
]
DIGEST = "sha256:" + "ab" * 32


def _strict_edit(case: str) -> str:
    edits = {
        "cpu = 1": (REAL[REAL.index("[cpu]") : REAL.index("[xpu]")], "cpu = 1\n"),
        "variants = zebin": (
            REAL[REAL.index("[xpu.triton.variants]") : REAL.index("[xpu.triton.llvm_pins]")],
            "",
        ),
        "pyton": ('python = "3.11.2"', 'pyton = "3.11.2"'),
        "tag digest": ('tag = "bookworm-slim"', f'tag = "{DIGEST}"'),
        "image with tag": ('image = "debian"', 'image = "debian:bookworm-slim"'),
        "numpy = 2": ('numpy = "2.4.6"\npyelftools', "numpy = 2\npyelftools"),
        "matrix = string": (
            'matrix = ["2025.0.5", "2025.1.1", "2025.2.2", "2025.3.3", "2026.0.0", "2026.1.2", "2026.2.0"]',
            'matrix = "2026.2.0"',
        ),
        "commit holds digest": (
            'commit = "a47976948863783de4a5b27dc9f05d8be916d559"',
            f'commit = "{DIGEST}"',
        ),
        "unknown nested": ('package = "intel-ocloc"\n', 'package = "intel-ocloc"\nverison = "1"\n'),
        "unknown far": ('packages = ["intel-cmplr-lib-ur"', 'zzz = "1"\npackages = ["intel-cmplr-lib-ur"'),
        "schema string": ("schema = 1", 'schema = "1"'),
        "variant commit short": ('blog = "197f5f843fd17deab1de1df1c6f17e60978ecdce"', 'blog = "197f5f8"'),
    }
    old, new = edits[case]
    assert old in REAL, f"fixture out of date: {old!r}"
    text = REAL.replace(old, new, 1)
    if case == "variants = zebin":  # the table written as a plain string under [xpu.triton]
        text = text.replace('llvm = "prebuilt"', 'llvm = "prebuilt"\nvariants = "zebin"', 1)
    return text


@pytest.mark.parametrize(("case", "key", "rule", "fix"), STRICT, ids=[c[0] for c in STRICT])
def test_strict_rules_one_line_naming_file_key_rule_and_fix(tmp_path, monkeypatch, case, key, rule, fix):
    """No traceback: a PinsError whose one line names the file, the key, the rule and the fix."""
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, _strict_edit(case))
    with pytest.raises(pins.PinsError) as info:
        pins.load(path)
    line = info.value.one_line()
    assert line.startswith(f"pins.toml: {key}: "), line
    assert rule in line and "(fix: " in line and fix in line, line
    assert "\n" not in line and len(line) <= 200, line


def test_non_utf8_byte_names_the_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "pins.toml"
    raw = REAL.encode().replace(b'description = "Debian', b'description = "Deb\xffian', 1)
    path.write_bytes(raw)
    line_no = raw[: raw.index(b"\xff")].count(b"\n") + 1
    with pytest.raises(pins.PinsError) as info:
        pins.load(path)
    assert info.value.one_line() == f"pins.toml: line {line_no}: byte 0xff is not UTF-8 (fix: save pins.toml as UTF-8)"


def test_unknown_key_without_close_match_lists_the_known_keys_within_200_chars(tmp_path):
    """A long path still leaves a one-line message of at most 200 characters."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = write(deep, REAL.replace('python = "3.11.2"', 'python = "3.11.2"\nqqqqqqqqqqqq = "1"', 1))
    with pytest.raises(pins.PinsError) as info:
        pins.load(path)
    line = info.value.one_line()
    assert "cpu.qqqqqqqqqqqq: unknown key" in line and len(line) <= 200, line


def test_unreadable_pins_path_is_one_line(tmp_path):
    with pytest.raises(pins.PinsError, match="cannot be read"):
        pins.load(tmp_path)  # a directory


def test_optional_keys_may_be_absent(tmp_path):
    """variants, ur.matrix, torch.wheel_version are optional: the cpu profile has no variants."""
    text = REAL.replace(
        'matrix = ["2025.0.5", "2025.1.1", "2025.2.2", "2025.3.3", "2026.0.0", "2026.1.2", "2026.2.0"]\n', "", 1
    )
    loaded = pins.load(write(tmp_path, text))
    assert "matrix" not in loaded.profile("cpu")["ur"] and "variants" not in loaded.profile("cpu")["triton"]


def test_every_key_of_the_real_pins_is_in_the_schema():
    """The schema and env/pins.toml describe the same keys, so the strict check rejects nothing real."""
    data = pins.tomllib.loads(REAL)
    for name in pins.PROFILES:
        for key, value in data[name].items():
            spec = pins.PROFILE_SCHEMA.keys[key]
            if isinstance(spec, pins.Table):
                assert set(value) <= set(spec.keys), (name, key)


@pytest.mark.parametrize("case", ["cpu = 1", "variants = zebin", "pyton", "tag digest", "non-UTF-8"])
def test_task_prints_one_line_and_no_traceback(tmp_path, case):
    """What a user sees from `invoke pins` with a broken pins file: one line of at most 200 characters."""
    path = tmp_path / "pins.toml"
    if case == "non-UTF-8":
        path.write_bytes(REAL.encode().replace(b"Debian bookworm", b"Debian \xfe bookworm", 1))
    else:
        path.write_text(_strict_edit(case))
    env = {**os.environ, "XPUKIT_PINS_FILE": str(path)}
    result = subprocess.run(
        [sys.executable, "-m", "invoke", "pins"], cwd=layout.REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xpukit: error: ") and "pins.toml: " in lines[0], result.stderr
    assert len(lines[0]) - len("xpukit: error: ") <= 200, lines[0]
