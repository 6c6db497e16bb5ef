"""The kernel report's cache key and store (xpukit.host.run.report_cache): a key that changes with
everything a report depends on, and no other thing. Real files, no Triton needed."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ROOT
from xpukit.host.run import report_cache
from xpukit.runtime.offline.isa import SEND_KINDS
from xpukit.runtime.offline.report_model import SCHEMA, Report

KERNEL = """
import triton
import triton.language as tl
from helpers import scale
from . import sibling  # a relative import resolves next to the kernel, too

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    scale(x_ptr, n, BLOCK)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.py").write_text(KERNEL)
    (tmp_path / "kernels" / "helpers.py").write_text("import os\nfrom deep import add\n\ndef scale(*a):\n    pass\n")
    (tmp_path / "kernels" / "deep.py").write_text("def add():\n    pass\n")
    (tmp_path / "kernels" / "sibling.py").write_text("X = 1\n")
    (tmp_path / "kernels" / "unrelated.py").write_text("Y = 1\n")
    return tmp_path


def _key(project: Path, toolchain: str = "image sha256:1", **options) -> report_cache.ReportKey:
    options = {"targets": ["pvc"], "configs": ["BLOCK=256"]} | options
    return report_cache.report_key(project / "kernels" / "k.py", "k", options, toolchain, project)


@pytest.mark.unit
def test_key_covers_the_kernel_and_the_modules_it_imports(project):
    key = _key(project)
    assert {Path(p).name for p in key.sources} == {"k.py", "helpers.py", "deep.py", "sibling.py"}
    assert _key(project) == key
    (project / "kernels" / "unrelated.py").write_text("Y = 2\n")
    assert _key(project).key == key.key  # a file the kernel does not import changes nothing
    (project / "kernels" / "deep.py").write_text("def add():\n    return 1\n")
    changed = _key(project)
    assert changed.key != key.key and changed.kernel_id == key.kernel_id  # same kernel, new report


@pytest.mark.unit
def test_key_covers_options_toolchain_and_kit_code(project):
    key = _key(project).key
    assert _key(project, configs=["BLOCK=512"]).key != key
    assert _key(project, targets=["pvc", "acm-g10"]).key != key
    assert _key(project, constexprs=["N=3"]).key != key
    assert _key(project, toolchain="image sha256:2").key != key  # a rebuilt image
    (project / "xpukit").mkdir()
    (project / "xpukit" / "targets.py").write_text("LIMITS = {}\n")  # the kit's own report code
    assert _key(project).key != key


def _counts(instructions: int = 200) -> dict:
    sends = dict.fromkeys(SEND_KINDS, 0) | {"global_load": 11, "global_store": 8, "eot": 1}
    names = ("send_total", "dpas", "math", "moves", "control_flow", "barriers", "fma", "alu")
    return {"instructions": instructions, "sends": sends, **dict.fromkeys(names, 3)}


def _row(config: str = "BLOCK=256", file: str = "/workspace/examples/kernels.py", **changes) -> dict:
    """A row as the image's run writes it (the fields of a real pvc row of scale_kernel, --lines)."""
    row = {"target": "pvc", "config": config, "error": None, "simd": 32, "grf": 128, "grf_mode": "default"}
    row |= {"grf_retry": False, "sub_group": 32, "work_group": 128, "scratch_bytes": 0, "private_bytes": 0}
    row |= {"slm_bytes": 0, "build_flags": "", "counts": _counts(), "limits": [], "grf_rule": "no spills"}
    row |= {"spills": {"bytes_per_thread": 0, "n_spills": 0}, "line_info": ""}
    row["occupancy"] = {"threads_per_xve": 8.0, "threads_per_xve_max": 8, "work_groups_per_xe_core": 16,
                        "limited_by": "threads"}  # fmt: skip
    row["lines"] = [{"file": file, "line": 36, "source": "def k():", "counts": _counts(13), "via": [], "asm": []}]
    return row | changes


def _report(*configs: str, file: str = "/workspace/examples/kernels.py", text: bytes = b"") -> dict:
    configs = configs or ("BLOCK=256",)
    source = {"file": file, "sha256": hashlib.sha256(text).hexdigest(), "first": 35, "lines": ["def k():"]}
    return {
        "kernel": "scale_kernel",
        "source": file,
        "kernel_source": source,
        "lines": True,
        "ocloc": "ocloc 26.27.039122 at /opt/xpukit/compiler/bin/ocloc",
        "targets": ["pvc"],
        "configs": [{"label": c, "constexprs": {}, "options": {}} for c in configs],
        "rows": [_row(c, file) for c in configs],
        "schema": SCHEMA,
    }


@pytest.mark.unit
def test_store_previous_and_failed_reports(tmp_path, project):
    cache = report_cache.ReportCache(tmp_path / "cache")
    first, second = _key(project), _key(project, configs=["BLOCK=512"])
    row = _row()
    stored = cache.store(first, Report.from_dict(_report()))
    assert cache.load(first.key) == stored and stored.stored_at
    assert cache.previous(first) is None
    cache.store(second, Report.from_dict(_report("BLOCK=512")))
    assert cache.previous(second).rows[0].config == "BLOCK=256"
    assert cache.previous(first).rows[0].config == "BLOCK=512"
    # A report with a failed cell is shown but not kept: the next run compiles again.
    third = _key(project, configs=["BLOCK=3"])
    cache.store(third, Report.from_dict(_report() | {"rows": [row | {"error": "failed to compile", "counts": None}]}))
    assert cache.load(third.key) is None
    # A damaged file is a miss, not a crash.
    cache.path(first.key).write_text("{not json")
    assert cache.load(first.key) is None
    assert not list(cache.folder.glob(".*.tmp"))
    assert json.loads((cache.folder / "history" / f"{first.kernel_id}.json").read_text())[-1] == second.key
    # A kernel keeps its newest HISTORY_KEEP reports; older ones are deleted.
    keys = [_key(project, configs=[f"BLOCK={2**i}"]) for i in range(report_cache.HISTORY_KEEP + 1)]
    for each in keys:
        cache.store(each, Report.from_dict(_report()))
    assert cache.load(keys[0].key) is None and cache.load(keys[-1].key) is not None
    assert len(cache.history(first.kernel_id)) == report_cache.HISTORY_KEEP


@pytest.mark.unit
def test_unwritable_cache_folder_is_one_line(tmp_path):
    from xpukit.errors import XpukitError
    from xpukit.host.commands import zebin as commands

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(XpukitError) as info:
        commands._make_cache_folder(blocker / "kernel-reports")
    line = info.value.one_line()
    assert "cannot be made" in line and "XPUKIT_CACHE_DIR" in line and "\n" not in line


# ----------------------------------------------------------------- entries are checked on load


def _flip_a_digit(path: Path) -> None:
    """Change one digit of a count in the stored bytes, as a bad disk or a stray write would: the
    entry stays valid JSON with a plausible number in it."""
    data = bytearray(path.read_bytes())
    at = data.index(b'"instructions":200') + len(b'"instructions":')
    data[at] = ord("7")  # 200 -> 700
    path.write_bytes(bytes(data))


@pytest.mark.unit
def test_a_flipped_digit_is_damage_not_a_report(tmp_path, project):
    cache = report_cache.ReportCache(tmp_path / "cache")
    key = _key(project)
    cache.store(key, Report.from_dict(_report()))
    assert cache.load(key.key).rows[0].counts.instructions == 200
    _flip_a_digit(cache.path(key.key))
    assert json.loads(cache.path(key.key).read_bytes().partition(b"\n")[2])  # still JSON: only the sum sees it
    report, damage = cache.lookup(key.key)
    assert report is None and "SHA-256" in damage
    assert not cache.path(key.key).exists()  # removed: nothing reads it again
    assert cache.lookup(key.key) == (None, None)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("damage", "wants"),
    [
        (lambda key: b"{not json", "no header line"),
        (lambda key: b"[" * 100_000 + b"\n", "no header line"),  # nested past the JSON parser's recursion
        (lambda key: _entry_of_bytes(key, b"[" * 100_000), "report is not JSON"),
        (lambda key: report_cache.encode_entry(key, _report())[:-40], "length"),
        (lambda key: report_cache.encode_entry("0" * 64, _report()), "another format or key"),
        (lambda key: _entry(key, {"kernel": "k", "rows": []}), "schema None"),
        (
            lambda key: _entry(key, {"kernel": "k", "rows": [], "schema": SCHEMA}),
            "report field source: expected a value",
        ),
        (lambda key: _entry(key, _report() | {"rows": [_row() | {"counts": {"instructions": "200"}}]}), "counts."),
        (lambda key: _entry(key, _report() | {"rows": [_row() | {"grf": "128"}]}), "rows[0].grf: expected"),
        (lambda key: _entry(key, _report() | {"rows": [_row() | {"error": "x", "counts": None}]}), "failed cell"),
        (lambda key: _entry(key, _report() | {"rows": "pvc"}), "field rows: expected a list"),
        (lambda key: _entry(key, _report() | {"kernel_source": {"file": 3}}), "kernel_source"),
        (lambda key: _entry(key, [1, 2]), "an object"),
    ],
)
def test_a_malformed_entry_is_a_miss_with_its_reason(tmp_path, project, damage, wants):
    """Bad JSON, a cut entry, another key's entry, missing fields and wrong types, each with a good
    checksum where it has one: a miss that says why, never an exception."""
    cache = report_cache.ReportCache(tmp_path / "cache")
    key = _key(project)
    cache.folder.mkdir(parents=True)
    cache.path(key.key).write_bytes(damage(key.key))
    report, why = cache.lookup(key.key)
    assert report is None and wants in why and "\n" not in why


def _entry(key: str, report: object) -> bytes:
    """An entry whose checksum is right for a report of the wrong shape."""
    return _entry_of_bytes(key, json.dumps(report | {"stored_at": "then"} if isinstance(report, dict) else report))


def _entry_of_bytes(key: str, text: str | bytes) -> bytes:
    """An entry whose checksum is right for ``text``, whatever it holds."""
    body = text.encode() if isinstance(text, str) else text
    header = {"format": report_cache.KEY_VERSION, "key": key, "sha256": hashlib.sha256(body).hexdigest()}
    return json.dumps(header | {"size": len(body)}).encode() + b"\n" + body + b"\n"


def _leaves(value: object, at: tuple = ()) -> list[tuple]:
    """Every path into a report's JSON (keys and list indexes), the containers' too."""
    found = [at] if at else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for name, item in items:
        found += _leaves(item, (*at, name))
    return found


def _edited(report: dict, at: tuple, value: object) -> dict:
    """``report`` with the field at ``at`` set to ``value`` (``_edited.DELETE``: removed)."""
    edited = json.loads(json.dumps(report))
    parent = edited
    for name in at[:-1]:
        parent = parent[name]
    if value is _edited.DELETE:
        del parent[at[-1]]
    else:
        parent[at[-1]] = value
    return edited


_edited.DELETE = object()


@pytest.mark.unit
def test_a_hand_edited_entry_with_its_checksum_fixed_is_refused_or_shown(tmp_path, project):
    """An entry edited by hand (or by another tool) with its header's SHA-256 made right again: every
    field removed and every field given a value of another kind (a number too large for a float,
    a send kind missing, an occupancy table cut short) is a miss that says why, or a report every
    format renders. Never an exception: one on load, or on printing the hit, would be a traceback
    on every run until the entry is deleted by hand."""
    from xpukit.runtime.offline import report_format
    from xpukit.targets import occupancy

    cache = report_cache.ReportCache(tmp_path / "cache")
    key = _key(project)
    row = _row() | {"occupancy": occupancy("pvc", 32, 128, 128)}
    report = cache.store(key, Report.from_dict(_report() | {"rows": [row]})).to_dict()
    odd = [_edited.DELETE, None, True, -1, 10**400, 1.5, "x", [], {}, [[1]]]
    problems = []
    for at in _leaves(report):
        for value in odd:
            cache.path(key.key).write_bytes(report_cache.encode_entry(key.key, _edited(report, at, value)))
            try:
                loaded, why = cache.lookup(key.key)
                if loaded is not None:
                    report_format.format_markdown(loaded)
                    report_format.format_html(loaded)
                    json.dumps(loaded.to_dict())
                else:
                    assert why and "\n" not in why
            except Exception as exc:
                problems.append(f"{at} = {value!r:.20}: {type(exc).__name__}: {exc}")
    assert not problems, "\n".join(problems[:20])


@pytest.mark.unit
def test_history_entries_that_are_not_keys_never_become_paths(tmp_path, project):
    """A history naming `../../x` (a full history, so the oldest entry is deleted as the newest is
    added): the file outside the cache survives, the entry is refused in one note and dropped."""
    cache = report_cache.ReportCache(tmp_path / "cache")
    sentinel = tmp_path / "x.json"  # cache.folder / "../../x.json"
    sentinel.write_text("keep me\n")
    key = _key(project)
    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(report_cache.HISTORY_KEEP)]
    (cache.folder / "history").mkdir(parents=True)
    history = cache.folder / "history" / f"{key.kernel_id}.json"
    history.write_text(json.dumps(["../../x", "/etc/passwd", 7, *keys]))
    assert (cache.folder / "../../x.json").resolve() == sentinel.resolve()
    cache.store(key, Report.from_dict(_report()))
    assert sentinel.read_text() == "keep me\n"
    assert json.loads(history.read_text()) == [*keys[1:], key.key]
    assert any("3 entries are not report keys; ignored" in note for note in cache.notes), cache.notes
    with pytest.raises(ValueError):
        cache.path("../../x")
    history.write_text('{"not": "a list"}')
    assert cache.history(key.kernel_id) == [] and "is damaged" in cache.notes[-1]


@pytest.mark.unit
def test_a_killed_runs_temporary_files_are_swept(tmp_path, project):
    """What a killed run leaves (a write never renamed, a report never read back) is removed by the
    next run; a file a live run may be writing, or one just made, is left alone."""
    cache = report_cache.ReportCache(tmp_path / "cache")
    key = _key(project)
    cache.store(key, Report.from_dict(_report()))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)  # a process that has ended: its pid names no one (until reused)
    old = time.time() - 2 * report_cache.SWEEP_AFTER_S
    left = [
        cache.folder / f".{key.key}.json.{dead}.tmp",
        cache.folder / f".{key.key}.{dead}.run.json",
        cache.folder / "history" / f".{key.kernel_id}.json.{dead}.tmp",
    ]
    live = cache.folder / f".{key.key}.json.{os.getpid()}.tmp"  # this process: a write in progress
    young = cache.folder / f".{key.key}.{dead}.run.json.1.tmp"  # the run's own writer, just now
    for path in [*left, live, young]:
        path.write_text('{"half": ')
    for path in [*left, live]:
        os.utime(path, (old, old))
    assert cache.sweep() == len(left)
    assert not any(p.exists() for p in left) and live.exists() and young.exists()
    assert cache.load(key.key) is not None  # the entry itself is untouched


# ----------------------------------------------------------------- the task body, with a fake run

KERNEL_FILE = ROOT / "examples" / "kernels.py"


@pytest.fixture
def fake_run(tmp_path, monkeypatch):
    """`invoke kernel-report`'s body with its run faked: the run writes ``runs[-1]``'s report where
    the task asks (``--save``) and prints a progress line and ``say`` (both on its stdout, by print
    and by a child process, as the image's merged output and a `--where host` process would)."""
    from xpukit.host import settings
    from xpukit.host.commands import zebin

    state = {"runs": 0, "plans": 0, "say": "", "report": None, "code": 0}

    def run_kit(ctx, side, args, reads=(), writes=(), what="", host_network=False, plan=None):
        state["runs"] += 1
        print("xpukit: compiling in the fake image")
        if state["say"]:
            subprocess.run(["echo", state["say"]], check=True)
        if state["report"] is not None:
            Path(args[args.index("--save") + 1]).write_text(json.dumps(state["report"]))
        return state["code"]

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(zebin, "_run_kit", run_kit)
    monkeypatch.setattr(zebin, "_kit_side", lambda ctx, where: zebin.KitSide(False, "fake"))

    def plan_for_run(ctx):
        state["plans"] += 1
        return "the task's one plan"

    monkeypatch.setattr(zebin, "plan_for_run", plan_for_run)
    monkeypatch.setattr(zebin, "_toolchain", lambda ctx, side, plan: f"fake toolchain of {plan}")
    monkeypatch.setattr(zebin, "kit_cache_root", lambda: tmp_path / "cache")
    ctx = settings.Context(settings.resolve({"profile": "cpu"}, {}, {}), {})
    state["report"] = _report(file="/workspace/examples/kernels.py", text=KERNEL_FILE.read_bytes())

    def kernel_report(*extra: str, output_format: str = "json") -> int:
        no_cache = "--no-cache" in extra
        return zebin.kernel_report(ctx, "container", "examples/kernels.py:scale_kernel", ["pvc"], [], output_format,
                                   no_cache=no_cache)  # fmt: skip

    state["kernel_report"] = kernel_report
    state["cache"] = report_cache.ReportCache(tmp_path / "cache")
    return state


def _stored_key(cache: report_cache.ReportCache) -> str:
    (entry,) = [p for p in cache.folder.glob("*.json")]
    return entry.stem


@pytest.mark.unit
def test_task_rebuilds_a_flipped_entry_in_one_line(fake_run, capfd):
    assert fake_run["kernel_report"]() == 0
    first = capfd.readouterr()
    assert json.loads(first.out)["rows"][0]["counts"]["instructions"] == 200
    assert fake_run["plans"] == 1  # one image plan per task: the cache key and the run share it
    cache = fake_run["cache"]
    key = _stored_key(cache)
    assert fake_run["kernel_report"]() == 0 and fake_run["runs"] == 1  # a hit: no run
    capfd.readouterr()
    _flip_a_digit(cache.path(key))
    assert fake_run["kernel_report"]() == 0 and fake_run["runs"] == 2  # rebuilt
    out, err = capfd.readouterr()
    assert json.loads(out)["rows"][0]["counts"]["instructions"] == 200
    damaged = [ln for ln in err.splitlines() if "damaged" in ln]
    assert len(damaged) == 1 and damaged[0].startswith("xpukit: warning: the stored report ") and key in damaged[0]
    assert "compiling it again" in damaged[0] and "Traceback" not in err
    assert cache.load(key).rows[0].counts.instructions == 200  # the rebuilt entry is whole


@pytest.mark.unit
@pytest.mark.parametrize("entry", [b"{not json", b'{"format": 1}\n[]\n', "schema"])
def test_task_treats_a_malformed_entry_as_a_miss(fake_run, capfd, entry):
    assert fake_run["kernel_report"]() == 0
    cache = fake_run["cache"]
    key = _stored_key(cache)
    capfd.readouterr()
    if entry == "schema":  # checksum right, a field the table reads missing
        rows = [{k: v for k, v in _row().items() if k != "counts"}]
        entry = _entry(key, _report() | {"rows": rows})
    cache.path(key).write_bytes(entry)
    assert fake_run["kernel_report"](output_format="md") == 0 and fake_run["runs"] == 2
    out, err = capfd.readouterr()
    assert "| pvc | BLOCK=256 |" in out and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if "is damaged" in ln]) == 1, err


@contextlib.contextmanager
def _unwritable(folder: Path) -> Iterator[None]:
    """``folder`` made so that no file can be made in it, root's runs too (chmod, then chattr +i
    where chmod does not stop this process); skips where neither does."""
    folder.chmod(0o555)
    immutable = False
    try:
        if os.access(folder, os.W_OK):  # root: permissions do not stop it
            immutable = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
        try:
            (folder / ".probe").touch()
        except OSError:
            pass
        else:
            (folder / ".probe").unlink()
            pytest.skip("no way to make a folder unwritable for this process here")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


@pytest.mark.unit
def test_task_with_an_unwritable_cache_shows_the_report_and_keeps_none(fake_run, capfd):
    """The cache folder is there but cannot be written (a read-only disk, another user's folder):
    the report is compiled and printed all the same, with one note that it is not kept, and no
    traceback; a file where the cache folder should be is the folder's one error, not "damaged"."""
    cache = fake_run["cache"]
    cache.folder.mkdir(parents=True)
    with _unwritable(cache.folder):
        assert fake_run["kernel_report"]() == 0
        out, err = capfd.readouterr()
        assert json.loads(out)["rows"][0]["counts"]["instructions"] == 200
        assert "Traceback" not in err and len([ln for ln in err.splitlines() if "is not kept" in ln]) == 1, err
        assert os.listdir(cache.folder) == []
    shutil.rmtree(cache.folder.parent)
    cache.folder.parent.write_text("a file where the cache folder goes\n")
    assert fake_run["kernel_report"]() == 1
    err = capfd.readouterr().err
    assert "damaged" not in err and "Traceback" not in err, err
    (line,) = [ln for ln in err.splitlines() if "error:" in ln]
    assert line.startswith("xpukit: error: the kit's cache folder ") and "cannot be made" in line, err
    assert line.endswith("(fix: set XPUKIT_CACHE_DIR to a folder you can write to)"), err


@pytest.mark.unit
def test_task_under_json_keeps_the_runs_lines_off_stdout(fake_run, capfd):
    """The run's own output (its progress, a one-line error) goes to stderr under --format json:
    stdout is the report alone, or nothing when the run failed."""
    fake_run["report"], fake_run["code"] = None, 1
    fake_run["say"] = "xpukit: error: constexpr BLOCK value 'abc' is not a Python literal (fix: ...)"
    assert fake_run["kernel_report"]() == 1
    out, err = capfd.readouterr()
    assert out == "" and "xpukit: error: constexpr BLOCK" in err and "compiling in the fake image" in err
    fake_run["report"], fake_run["code"], fake_run["say"] = _report(text=KERNEL_FILE.read_bytes()), 0, "noise"
    assert fake_run["kernel_report"]() == 0
    out, err = capfd.readouterr()
    assert json.loads(out) and "noise" in err
    print("stdout is back")  # the redirection ended with the run
    assert capfd.readouterr().out == "stdout is back\n"


@pytest.mark.unit
def test_task_names_files_as_the_user_gave_them(fake_run, capfd):
    """The image's run names the checkout's files under /workspace; printed, the kernel's file is the
    path as given (examples/kernels.py), stored, the host's absolute path, never /workspace."""
    helper = "/workspace/examples/helpers.py"
    fake_run["report"]["rows"][0]["lines"].append({**fake_run["report"]["rows"][0]["lines"][0], "file": helper})
    assert fake_run["kernel_report"]() == 0
    report = json.loads(capfd.readouterr().out)
    files = {report["source"], report["kernel_source"]["file"], report["rows"][0]["lines"][0]["file"]}
    assert files == {"examples/kernels.py"}
    assert report["rows"][0]["lines"][1]["file"] == str(ROOT.resolve() / "examples" / "helpers.py")
    stored = fake_run["cache"].load(_stored_key(fake_run["cache"]))
    assert stored.source == stored.kernel_source.file == str(KERNEL_FILE.resolve())
    assert "/workspace" not in json.dumps(stored.to_dict())
    assert fake_run["kernel_report"]() == 0 and fake_run["runs"] == 1  # the hit shows them as given too
    assert json.loads(capfd.readouterr().out)["source"] == "examples/kernels.py"


@pytest.mark.unit
def test_watch_with_another_format_is_refused_in_one_line():
    from tests.support.invoke import invoke_with_cache
    from xpukit.errors import EXIT_USAGE

    for fmt in ("json", "html"):
        result = invoke_with_cache("kernel-report", "examples/kernels.py:scale_kernel", "--watch", "--format", fmt)
        errors = [ln for ln in result.stderr.splitlines() if "error:" in ln]
        assert result.returncode == EXIT_USAGE and "Traceback" not in result.stderr, result.stderr
        assert len(errors) == 1 and f"--format {fmt}" in errors[0] and "(fix: " in errors[0], result.stderr
        assert result.stdout == ""
