"""Static stall sources of a kernel: where its instructions wait, read from the software scoreboard
annotations IGC writes into the code. Not measurements: a GPU samples where threads actually stall
(unitrace's SbidStall, DistStall, SyncStall, SendStall); these are the places that can.

Xe GPUs since Xe-LP have no hardware register scoreboard: the compiler marks every dependency in the
instruction's ``{...}`` options (``iga64``/``ocloc disasm`` print them), and the hardware waits there.
Per instruction, a count per kind (``STALL_KINDS``):

- ``sbid``: token waits in the annotation, ``$N.dst`` (wait until the out-of-order instruction that
  set token N has written its result) and ``$N.src`` (until it has read its sources, so they may be
  overwritten): one per annotation. A bare ``$N`` is not a wait: it is the token an out-of-order
  instruction (send, math, dpas) sets. The static source of unitrace's SbidStall.
- ``send``: the token waits whose token a send may have set (a forward walk of the CFG finds which
  instructions' tokens reach the wait): send-to-use waits, on a load's data or a store's payload.
  They count in ``sbid`` (or ``sync``, for a ``sync.allrd``/``sync.allwr`` token list) as well:
  ``send`` says which of those waits are for memory, the latency a prefetch or an earlier load
  hides. (On a GPU they are sampled as SbidStall; unitrace's SendStall is a send that cannot issue.)
- ``dist``: distance waits in the annotation: ``I@2`` (the integer pipe's result 2 in-order
  instructions back), ``F@`` float, ``L@`` long (64-bit), ``M@`` math, ``A@`` all pipes, ``@N``
  (Xe-HPG's single distance): one per annotation. The static source of DistStall.
- ``sync``: one per ``sync.*`` instruction that waits: ``sync.allrd``/``sync.allwr`` (every listed
  token), ``sync.bar`` (the barrier), ``sync.fence``/``sync.host``/...; ``sync.nop`` only carries
  an annotation, counted by its kind. The static source of SyncStall.

``Stalls.waits_on`` gives, for each instruction with a token wait, the PCs of the instructions that
may have set the awaited tokens (a wait on a load names the load).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import deque

from xpukit.runtime.offline.flow import IgaInstruction, Listing
from xpukit.runtime.offline.isa import SEND_OPCODES

STALL_KINDS = ("sbid", "send", "dist", "sync")
_TOKEN = re.compile(r"^\$(\d+)(?:\.(dst|src))?$")
_DISTANCE = re.compile(r"^([A-Z]?)@(\d+)$")
_TOKEN_LIST = re.compile(r"\(\s*(\$\d+(?:\s*,\s*\$\d+)*)\s*\)")
_TOKEN_MASK = re.compile(r"\b0x([0-9A-Fa-f]+)\b")
_ALL_TOKENS = -1  # a sync.allrd/allwr with no list waits on every token


@dataclasses.dataclass(slots=True)
class Wait:
    """The waits one instruction's annotation and opcode carry."""

    tokens: tuple[str, ...]  # "$3.dst", "$1.src"
    distances: tuple[str, ...]  # "A@1", "I@2"
    sets: int | None  # the token it sets (bare "$N"), None when it sets none
    sync_tokens: tuple[int, ...]  # tokens a sync.allrd/allwr lists (-1: all of them)
    sync: bool  # a waiting sync.* (not sync.nop)


@dataclasses.dataclass(frozen=True)
class Stalls:
    by_pc: dict[int, dict[str, int]]  # PC -> {kind: count} for each kind in STALL_KINDS (zeros kept)
    totals: dict[str, int]  # kind -> the kernel's count: the sum of by_pc
    waits_on: dict[int, tuple[int, ...]]  # PC of a token wait -> PCs that may have set its tokens
    waits: dict[int, Wait]  # PC -> its annotation, parsed


@functools.lru_cache(maxsize=1024)
def _annotation(swsb: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], int | None]:
    """(token waits, distance waits, the token set) of one ``{...}`` option list."""
    tokens: list[str] = []
    distances: list[str] = []
    sets = None
    for item in swsb:
        if (token := _TOKEN.match(item)) is not None:
            if token.group(2):
                tokens.append(item)
            else:
                sets = int(token.group(1))
        elif _DISTANCE.match(item):
            distances.append(item)
    return tuple(tokens), tuple(distances), sets


def parse_wait(ins: IgaInstruction) -> Wait:
    """One instruction's waits and token, from its ``{...}`` options and, for sync.allrd/allwr, its
    token operand (``sync.allwr ($3,$5)``)."""
    tokens, distances, sets = _annotation(ins.swsb)
    sync_tokens: tuple[int, ...] = ()
    sync = (ins.op.startswith("sync.") and ins.op != "sync.nop") or ins.op == "wait"
    if ins.op in ("sync.allrd", "sync.allwr"):
        operands = ins.text.partition("//")[0].partition(ins.op)[2].split("{")[0]
        if (listed := _TOKEN_LIST.search(operands)) is not None:
            sync_tokens = tuple(int(t.strip()[1:]) for t in listed.group(1).split(","))
        elif (mask := _TOKEN_MASK.search(operands)) is not None:
            bits = int(mask.group(1), 16)
            sync_tokens = tuple(t for t in range(bits.bit_length()) if bits >> t & 1)
        else:
            sync_tokens = (_ALL_TOKENS,)
    return Wait(tokens, distances, sets, sync_tokens, sync)


def _awaited(wait: Wait) -> list[int]:
    out = [int(_TOKEN.match(t).group(1)) for t in wait.tokens]  # type: ignore[union-attr]
    return out + list(wait.sync_tokens)


_State = dict[int, frozenset[int]]  # token -> PCs of the instructions whose setting of it may reach here


def _reaching(state: _State, token: int) -> frozenset[int]:
    if token == _ALL_TOKENS:
        return frozenset().union(*state.values())
    return state.get(token, frozenset())


def _join(into: _State, other: _State) -> bool:
    changed = False
    for token, setters in other.items():
        have = into.get(token)
        if have is None or not setters <= have:
            into[token] = setters | have if have is not None else setters
            changed = True
    return changed


def analyze_stalls(listing: Listing) -> Stalls:
    """Per instruction, the static stall sources by kind (module docstring), their totals, and what
    each token wait waits on."""
    instructions = listing.instructions
    blocks = listing.blocks
    waits = [parse_wait(ins) for ins in instructions]
    is_send = [ins.op.partition(".")[0] in SEND_OPCODES for ins in instructions]
    send_pcs = {ins.pc for ins, send in zip(instructions, is_send, strict=True) if send}
    by_pc: dict[int, dict[str, int]] = {}
    waits_on: dict[int, tuple[int, ...]] = {}
    # Forward over the CFG: which token settings reach each block's top. A block is walked again only
    # when more settings reach it, so its last walk (whose counts stay) had the final ones.
    block_in: list[_State] = [{} for _ in blocks]
    work = deque(range(len(blocks)))
    queued = set(work)
    while work:
        b = work.popleft()
        queued.discard(b)
        state = dict(block_in[b])
        for i in range(blocks[b].start, blocks[b].end):
            ins, wait = instructions[i], waits[i]
            counts = {"sbid": len(wait.tokens), "send": 0, "dist": len(wait.distances), "sync": int(wait.sync)}
            if wait.tokens or wait.sync_tokens:
                setters: set[int] = set()
                for token in _awaited(wait):
                    reaching = _reaching(state, token)
                    setters |= reaching
                    counts["send"] += bool(reaching & send_pcs)
                if setters:
                    waits_on[ins.pc] = tuple(sorted(setters))
            by_pc[ins.pc] = counts
            if wait.sets is not None:
                state[wait.sets] = frozenset((ins.pc,))
        for s in blocks[b].succs:
            if _join(block_in[s], state) and s not in queued:
                queued.add(s)
                work.append(s)
    totals = {kind: sum(c[kind] for c in by_pc.values()) for kind in STALL_KINDS}
    return Stalls(by_pc, totals, waits_on, {ins.pc: w for ins, w in zip(instructions, waits, strict=True)})
