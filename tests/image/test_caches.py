"""Caches that heal: every kind of damage to a real Triton cache entry or a real program-cache
entry is found before use, dropped with exactly one warning, rebuilt, and the kernel still gives
numpy's result on the UR CPU device.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support import ROOT

pytest.importorskip("triton")

from tests.support.kernels import scale_typed
from xpukit.runtime import cache_auth
from xpukit.runtime.offline import spirv
from xpukit.runtime.triton.launch import ProgramCache, TritonKernel
from xpukit.runtime.triton.triton_cache import CHECKSUMS_KEY, GROUP_PREFIX, HealingCacheManager, check_file

pytestmark = pytest.mark.container

SIG = "x_ptr:*fp32,y_ptr:*fp32,scale:fp32,n:i32"
BLOCK = 1024
N = 3000


@pytest.fixture
def triton_dir(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "triton"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(path))
    return path


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("xpukit")]


def run_scale(session, cache: ProgramCache | bool = False) -> TritonKernel:
    """A fresh TritonKernel (so Triton's compile() consults its disk cache), launched and checked."""
    kernel = TritonKernel(scale_typed, SIG, {"BLOCK": BLOCK}, cache=cache)
    x = np.random.default_rng(7).standard_normal(N, dtype=np.float32)
    with session.from_numpy(x) as dx, session.empty(N, np.float32) as dy:
        kernel[(-(-N // BLOCK),)](dx, dy, np.float32(1.5), N, session=session)
        session.finish()
        np.testing.assert_array_equal(dy.to_numpy(np.float32, N), x * np.float32(1.5))
    return kernel


def entry_file(triton_dir: Path, suffix: str) -> Path:
    (path,) = triton_dir.glob(f"*/scale_typed.{suffix}")
    return path


def group_file(triton_dir: Path) -> Path:
    (path,) = triton_dir.glob(f"*/{GROUP_PREFIX}scale_typed.json")
    return path


def cut_at_instruction_boundary(data: bytes) -> bytes:
    """A SPIR-V module shortened by whole instructions: still parses, so only the checksum can tell."""
    header, instructions, endian = spirv.parse(data)
    return spirv.serialize(header, instructions[: len(instructions) // 2], endian)


def flip_middle_byte(data: bytes) -> bytes:
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0x40]) + data[i + 1 :]


def drop_checksums(triton_dir: Path) -> None:
    """Make the entry look like one stock Triton wrote (no checksums): the structural checks remain."""
    group = group_file(triton_dir)
    data = json.loads(group.read_text())
    del data[CHECKSUMS_KEY]
    group.write_text(json.dumps(data))


TRITON_DAMAGE = {
    "spv truncated mid-word": ("spv", lambda d: d[: len(d) // 2 + 3]),
    "spv truncated at an instruction boundary": ("spv", cut_at_instruction_boundary),
    "spv one byte flipped": ("spv", flip_middle_byte),
    "spv empty": ("spv", lambda d: b""),
    "metadata json truncated": ("json", lambda d: d[: len(d) // 2]),
    "metadata json not JSON": ("json", lambda d: b"\x00\xffnot json"),
    "metadata json a list": ("json", lambda d: b"[1, 2, 3]"),
    "llir truncated": ("llir", lambda d: d[: len(d) // 3]),
    "group file truncated": ("group", lambda d: d[: len(d) // 2]),
    "group file without child_paths": ("group", lambda d: b'{"other": 1}'),
}


@pytest.mark.parametrize("kind", list(TRITON_DAMAGE))
def test_triton_cache_entry_heals(session, triton_dir, caplog, kind):
    run_scale(session)
    suffix, damage = TRITON_DAMAGE[kind]
    path = group_file(triton_dir) if suffix == "group" else entry_file(triton_dir, suffix)
    path.write_bytes(damage(path.read_bytes()))
    caplog.clear()
    run_scale(session)
    found = warnings_of(caplog)
    assert len(found) == 1, found
    assert "Triton cache entry" in found[0] and "corrupt" in found[0] and "recompiled" in found[0]
    # The rebuilt entry is whole and checksummed again: a third compile uses it without a word.
    spv = entry_file(triton_dir, "spv").read_bytes()
    spirv.parse(spv)
    sums = json.loads(group_file(triton_dir).read_text())[CHECKSUMS_KEY]
    assert sums["scale_typed.spv"] == hashlib.sha256(spv).hexdigest()
    caplog.clear()
    run_scale(session)
    assert warnings_of(caplog) == []


@pytest.mark.parametrize("kind", ["spv truncated mid-word", "metadata json a list", "child file missing"])
def test_entry_written_without_checksums_is_still_checked(session, triton_dir, caplog, kind):
    """Entries from stock Triton (no checksums recorded) still get the structural checks."""
    run_scale(session)
    drop_checksums(triton_dir)
    if kind == "child file missing":
        entry_file(triton_dir, "spv").unlink()
    else:
        suffix, damage = TRITON_DAMAGE[kind]
        path = entry_file(triton_dir, suffix)
        path.write_bytes(damage(path.read_bytes()))
    caplog.clear()
    run_scale(session)
    found = warnings_of(caplog)
    assert len(found) == 1 and "corrupt" in found[0], found


def test_intact_entry_is_served_from_the_cache(session, triton_dir, caplog):
    """A healthy entry is a hit: the files are not rewritten and nothing is said."""
    run_scale(session)
    spv = entry_file(triton_dir, "spv")
    before = spv.stat().st_mtime_ns
    caplog.clear()
    run_scale(session)
    assert warnings_of(caplog) == []
    assert spv.stat().st_mtime_ns == before


def test_dropping_a_corrupt_entry_touches_only_its_own_folder(tmp_path, monkeypatch):
    """A group file naming files outside its entry folder cannot make the cache read or delete them."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    manager = HealingCacheManager("K" * 52)
    bystander = Path(manager.cache_dir).parent / "precious.spv"
    bystander.write_bytes(b"not spir-v")
    group = Path(manager.cache_dir) / f"{GROUP_PREFIX}k.json"
    for listed in ({"k.json": str(bystander), "../precious.spv": str(bystander)}, {"k.json": str(bystander)}):
        group.write_text(json.dumps({"child_paths": listed}))
        assert manager.get_group("k.json") is None
        assert bystander.exists()
        assert not group.exists()


def test_moved_cache_is_read_where_it_now_lives(session, tmp_path, monkeypatch, caplog):
    """Group files record absolute paths; a cache copied elsewhere is still served (no recompile)."""
    import shutil

    first = tmp_path / "first"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(first))
    run_scale(session)
    shutil.move(str(first), str(tmp_path / "moved"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "moved"))
    spv = entry_file(tmp_path / "moved", "spv")
    before = spv.stat().st_mtime_ns
    caplog.clear()
    run_scale(session)
    assert warnings_of(caplog) == []
    assert spv.stat().st_mtime_ns == before
    assert not first.exists()


@pytest.mark.parametrize(
    ("name", "data", "problem"),
    [
        ("k.json", b'{"name": "k"}', "lacks target, cluster_dims"),
        ("k.json", b"null", "JSON NoneType"),
        ("k.spv", b"\x03\x02\x23\x07" * 2, "not SPIR-V"),
        ("k.zebin", b"MZ\x00\x00", "not an ELF"),
        ("k.ttir", b"\xff\xfe", "not UTF-8"),
    ],
)
def test_file_checks_name_the_problem(name, data, problem):
    from xpukit.runtime.triton.triton_cache import CorruptEntry

    with pytest.raises(CorruptEntry, match=problem):
        check_file(name, data, metadata=True)


# --- the kit's program cache ------------------------------------------------------------------


def program_entry(directory: Path, suffix: str) -> Path:
    (path,) = directory.glob(f"*.{suffix}")
    return path


PROGRAM_DAMAGE = {
    "json a list": ("json", lambda d: b"[]"),
    "json a string": ("json", lambda d: b'"hello"'),
    "json truncated": ("json", lambda d: d[: len(d) // 2]),
    "json not JSON": ("json", lambda d: b"\x00\x01\x02"),
    "json wrong checksum": (
        "json",
        lambda d: json.dumps({**json.loads(d), "sha256": "0" * 64}).encode(),
    ),
    "bin truncated": ("bin", lambda d: d[: len(d) // 2]),
    "bin one byte flipped": ("bin", flip_middle_byte),
    "bin empty": ("bin", lambda d: b""),
}


@pytest.mark.parametrize("kind", list(PROGRAM_DAMAGE))
def test_program_cache_entry_heals(session, triton_dir, tmp_path, caplog, kind):
    directory = tmp_path / "programs"
    run_scale(session, ProgramCache(directory))
    suffix, damage = PROGRAM_DAMAGE[kind]
    path = program_entry(directory, suffix)
    path.write_bytes(damage(path.read_bytes()))
    cache = ProgramCache(directory)
    caplog.clear()
    run_scale(session, cache)
    found = warnings_of(caplog)
    assert len(found) == 1, found
    assert "program cache entry" in found[0]
    assert [e for e, _ in cache.events] == ["corrupt", "store"]
    again = ProgramCache(directory)
    caplog.clear()
    run_scale(session, again)
    assert warnings_of(caplog) == []
    assert [e for e, _ in again.events] == ["hit"]


def test_program_cache_entry_with_only_one_file_heals(session, triton_dir, tmp_path, caplog):
    directory = tmp_path / "programs"
    run_scale(session, ProgramCache(directory))
    program_entry(directory, "bin").unlink()
    cache = ProgramCache(directory)
    caplog.clear()
    run_scale(session, cache)
    assert len(warnings_of(caplog)) == 1
    assert [e for e, _ in cache.events] == ["corrupt", "store"]


# --- the program cache's authenticator: entries changed by anything but this cache ----------------

PROGRAM_RUN = """
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from tests.support.kernels import scale_typed
from tests.support.runtime_required import ur_session_or_skip
from xpukit.runtime.triton.launch import ProgramCache, TritonKernel


class TrustingCache(ProgramCache):
    # What a cache with only a checksum did with a binary whose checksum was updated: load it.
    def read(self, key, device, spirv_sha256):
        return open(sys.argv[3], "rb").read()


session = ur_session_or_skip()
cache = (TrustingCache if len(sys.argv) > 3 else ProgramCache)(sys.argv[1])
x = np.arange({n}, dtype=np.float32)
exact = []
for block in map(int, sys.argv[2].split(",")):
    kernel = TritonKernel(scale_typed, {sig!r}, {{"BLOCK": block}}, cache=cache)
    with session.from_numpy(x) as dx, session.empty({n}, np.float32) as dy:
        kernel[(-(-{n} // block),)](dx, dy, np.float32(1.5), {n}, session=session)
        session.finish()
        exact.append(bool(np.array_equal(dy.to_numpy(np.float32, {n}), x * np.float32(1.5))))
print(json.dumps({{"events": cache.events, "exact": exact}}))
"""


def program_script(tmp_path: Path, directory: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    script = tmp_path / "program_run.py"
    script.write_text(PROGRAM_RUN.format(root=str(ROOT), n=N, sig=SIG))
    cmd = [sys.executable, str(script), str(directory), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def run_program_script(tmp_path: Path, directory: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """The scale kernel at two block sizes through ProgramCache(directory), in a fresh process: a
    forged native binary that got through would kill it (SIGILL), not fail a check."""
    proc = program_script(tmp_path, directory, "256,1024")
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["exact"] == [True, True], result
    return proc, result


def program_warnings(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if "program cache" in ln]


def entries_by_block(directory: Path, result: dict) -> dict[int, tuple[Path, Path]]:
    """(bin, json) of the first run's entries, by block size (the run stores 256 first, then 1024)."""
    keys = [key for event, key in result["events"] if event == "store"]
    assert len(keys) == 2, result
    return {b: (directory / f"{k}.bin", directory / f"{k}.json") for b, k in zip((256, 1024), keys, strict=True)}


def forge_binary(bin_path: Path, meta_path: Path) -> bytes:
    """What the issue describes: bytes changed in the middle of the binary, checksum and size updated."""
    data = bytearray(bin_path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    bin_path.write_bytes(bytes(data))
    meta = json.loads(meta_path.read_text())
    meta.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    meta_path.write_text(json.dumps(meta))
    return bytes(data)


def test_program_binary_changed_with_its_checksum_updated_is_rejected(tmp_path):
    """The issue's case: such an entry used to kill every later run with SIGILL and stay. Now it
    fails its authenticator: one warning, dropped, rebuilt from SPIR-V, never loaded. The control
    loads the forged binary on purpose: it traps, or (seen in 1 of 8 runs) spins until killed."""
    directory = tmp_path / "programs"
    _, first = run_program_script(tmp_path, directory)
    bin_path, meta_path = entries_by_block(directory, first)[1024]
    forged = forge_binary(bin_path, meta_path)
    # Control: loaded as a checksum-only cache loaded it, the forged binary kills the process.
    (tmp_path / "forged.bin").write_bytes(forged)
    try:
        control = program_script(tmp_path, tmp_path / "control", "1024", str(tmp_path / "forged.bin"), timeout=60)
        harmful = control.returncode != 0
    except subprocess.TimeoutExpired:  # killed at the timeout
        harmful = True  # the forged code may spin on the CPU device instead of trapping: as harmful
    assert harmful, "the forged binary ran cleanly: this test no longer forges anything harmful"

    proc, second = run_program_script(tmp_path, directory)
    warnings = program_warnings(proc)
    assert len(warnings) == 1 and "authenticator" in warnings[0] and "rebuilt" in warnings[0], proc.stderr
    assert [e for e, _ in second["events"]] == ["hit", "corrupt", "store"], second
    assert bin_path.read_bytes() != forged  # the entry was replaced by the rebuilt binary
    proc, third = run_program_script(tmp_path, directory)
    assert program_warnings(proc) == [] and [e for e, _ in third["events"]] == ["hit", "hit"]


@pytest.mark.parametrize("attack", ["wrong key", "replayed entry of another kernel"])
def test_program_entry_under_another_key_or_name_is_rejected(tmp_path, attack):
    directory = tmp_path / "programs"
    _, first = run_program_script(tmp_path, directory)
    entries = entries_by_block(directory, first)
    if attack == "wrong key":
        # Every entry was made under the old key: each is rejected once, then rebuilt under the new one.
        key_file = directory / cache_auth.LOCAL_KEY_NAME
        key_file.unlink()
        key_file.write_bytes(os.urandom(32))
        key_file.chmod(0o600)
        expected = ["corrupt", "store", "corrupt", "store"]
    else:
        # The 256-block kernel's valid entry copied over the 1024-block one's: a valid record and
        # authenticator, of another entry.
        for src, dst in zip(entries[256], entries[1024], strict=True):
            dst.write_bytes(src.read_bytes())
        expected = ["hit", "corrupt", "store"]
    proc, second = run_program_script(tmp_path, directory)
    warnings = program_warnings(proc)
    assert len(warnings) == expected.count("corrupt"), proc.stderr
    assert all("authenticator" in w for w in warnings), warnings
    assert [e for e, _ in second["events"]] == expected, second


def test_program_cache_key_others_can_read_turns_the_cache_off_with_one_warning(tmp_path):
    directory = tmp_path / "programs"
    run_program_script(tmp_path, directory)
    (directory / cache_auth.LOCAL_KEY_NAME).chmod(0o644)
    proc, second = run_program_script(tmp_path, directory)
    warnings = program_warnings(proc)
    assert len(warnings) == 1 and "chmod 600" in warnings[0], proc.stderr
    assert [e for e, _ in second["events"]] == ["miss", "store-failed", "miss", "store-failed"], second
