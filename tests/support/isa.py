"""Helpers the test_isa.py modules of several test folders share."""

from __future__ import annotations

from xpukit.runtime.offline import isa


def independent_counts(text: str) -> dict[str, int]:
    """Counts from the ISA text by plain string tests (the oracle for the module's parser)."""
    counts = dict.fromkeys(
        (
            "instructions",
            "dpas",
            "math",
            "mov",
            "sync_bar",
            "ugm_load",
            "ugm_store",
            "slm",
            "scratch",
            "sends",
            "padding",
        ),
        0,
    )
    for line in text.splitlines():
        code = line.split("//")[0]
        comment = line.split("//", 1)[1] if "//" in line else ""
        words = code.split()
        if not words or words[0].endswith(":"):
            continue
        if words[0].startswith("("):  # predicate such as (W) or (W&f0.0)
            words = words[1:]
        op = words[0]
        if op == "illegal":
            continue
        if op in ("sync.nop", "sync.allrd", "sync.allwr", "nop") or (
            op == "mov" and len(words) > 2 and words[2].startswith("null")
        ):
            counts["padding"] += 1
            continue
        counts["instructions"] += 1
        counts["dpas"] += op.startswith("dpas")
        counts["math"] += op.startswith("math.")
        counts["mov"] += op in ("mov", "movi", "smov")
        counts["sync_bar"] += op == "sync.bar"
        if op.startswith("send"):
            counts["sends"] += 1
            message = comment.split(";")[-1].strip()
            # .bss[...] is a bindless global buffer, .ss[...] the scratch surface
            scratch = "scratch" in message or (".ss[" in message and ".bss[" not in message)
            counts["scratch"] += scratch
            if not scratch and op == "send.ugm" and message.startswith("load.ugm"):
                counts["ugm_load"] += 1
            if not scratch and op == "send.ugm" and message.startswith("store.ugm"):
                counts["ugm_store"] += 1
            counts["slm"] += ".slm" in message and ("load" in message or "store" in message)
    return counts


def assert_counts_match(text: str) -> isa.IsaCounts:
    counts = isa.count_isa(text)
    oracle = independent_counts(text)
    assert counts.instructions == oracle["instructions"] > 0
    assert counts.padding == oracle["padding"]
    assert counts.dpas == oracle["dpas"]
    assert counts.math == oracle["math"]
    assert counts.moves == oracle["mov"]
    assert counts.barriers == oracle["sync_bar"]
    assert counts.send_total == oracle["sends"]
    assert counts.sends["scratch_fill"] + counts.sends["scratch_spill"] == oracle["scratch"]
    assert counts.sends["slm_load"] + counts.sends["slm_store"] == oracle["slm"]
    return counts
