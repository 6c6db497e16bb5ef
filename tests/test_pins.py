"""env/pins.toml: the real file loads, each broken rule names the file, the key and the rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xpukit.host import lock, pins

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
    assert cpu["ur"]["version"] == "2025.3.3"
    assert "triton-xpu==3.3.0b1" in cpu.pypi_requirements()
    xpu = loaded.profile("xpu")
    assert xpu["triton"]["commit"] == "9e237132e02d6e813836ad6a7137bd275fc0a7cd"
    assert xpu["torch"]["commit"] == "a47976948863783de4a5b27dc9f05d8be916d559"


def test_empty_digest_warns_not_pinned_by_digest():
    cpu = pins.load().profile("cpu")
    if cpu["base"]["digest"]:
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
    ('[cpu.ocloc]\nsource = "apt"', '[cpu.ocloc]\nsource = "ppa"', "cpu.ocloc.source", "not one of"),
]


@pytest.mark.parametrize(("old", "new", "key", "rule"), BROKEN, ids=[b[2] for b in BROKEN])
def test_each_broken_rule_is_named(tmp_path, old, new, key, rule):
    assert old in REAL, f"fixture out of date: {old!r}"
    path = write(tmp_path, REAL.replace(old, new, 1))
    with pytest.raises(pins.PinsError) as info:
        pins.load(path)
    message = str(info.value)
    assert str(path) in message and key in message and rule in message


def test_missing_key_is_named(tmp_path):
    path = write(tmp_path, REAL.replace('package = "intel-opencl-icd"\n', "", 1))
    with pytest.raises(pins.PinsError, match=r"cpu\.ocloc\.package: missing key"):
        pins.load(path)


def test_missing_profile_table_is_named(tmp_path):
    start = REAL.index("[xpu]")
    end = REAL.index("[host]")
    path = write(tmp_path, REAL[:start] + REAL[end:])
    with pytest.raises(pins.PinsError, match=r"xpu: missing profile table"):
        pins.load(path)


def test_unknown_profile_table_and_request(tmp_path):
    path = write(tmp_path, REAL + '\n[gpu]\ndescription = "x"\n')
    with pytest.raises(pins.PinsError, match=r"gpu: unknown table"):
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
    assert loaded.profile("cpu")["base"]["digest"] == digest
    assert loaded.profile("xpu")["base"]["digest"] == ""
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
        python = loaded.profile(name)["python"]
        target = lock.LOCK_TARGETS[name]
        if python:  # an unpinned python (xpu: the base image's) cannot be checked
            major_minor = ".".join(python.split(".")[:2])
            assert target[target.index("--python-version") + 1] == major_minor, name
    ur = loaded.profile("cpu")["ur"]
    matrix_lines = {".".join(v.split(".")[:2]) for v in ur["matrix"]}
    assert matrix_lines == set(_api.SUPPORTED_RELEASES), "every bound UR release is tested, and only those"
    assert ".".join(ur["version"].split(".")[:2]) in _api.SUPPORTED_RELEASES
