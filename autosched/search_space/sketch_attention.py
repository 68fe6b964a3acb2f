"""The flash-attention rewrite as a schedule step and a sketch rule.

Where :func:`~.attention_pattern.match_attention` finds scores -> softmax -> weighted sum, the step
``flash_attention`` on the output stage replaces the seven stages by one blocked loop nest (lowered
by :mod:`autosched.lower.flash`): query blocks of ``block_q`` rows (the parallel unit, Q reused across
all key blocks), key blocks of ``block_k``, an online softmax (running max and sum per row, the
accumulator rescaled), the score tile ``rows x 16*cols`` and the output tile ``pv_rows x pv_cols``
vectors in registers. Memory stays linear in the sequence: no L x L buffer exists. The te stages stay
the semantics (what the numpy reference evaluates); the step's six numbers are the decisions the
search samples and mutates, recorded in the trace like any other step.

Why a rewrite and not a te construct: users, topi and the ONNX frontend keep writing softmax-then-
contract as te, and every such program benefits; GPU-style targets keep the unfused stages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ScheduleError
from ..te.tensor import ComputeOp
from .attention_pattern import AttentionPattern, match_attention
from .sketch_base import BuilderBase
from .trace import Step

if TYPE_CHECKING:
    from .schedule import Schedule

FLASH_ARGS = ("block_q", "block_k", "rows", "cols", "pv_rows", "pv_cols")
MAX_TILE_VECTORS = 24  # of AVX-512's 32 registers: the rest hold operands
BLOCK_Q = (8, 16, 24, 32, 48, 64, 96, 128)
BLOCK_K = (32, 64, 128, 192, 256, 384, 512)
ROWS = (2, 3, 4, 6, 8)  # sampled register rows; a step may also say 1 (fewer than 2 rows reuse nothing)
LANES = 16  # the score tile's lanes run over keys (K is packed transposed)


@dataclass(frozen=True)
class FlashConfig:
    pattern: AttentionPattern
    block_q: int
    block_k: int
    rows: int
    cols: int
    pv_rows: int
    pv_cols: int


def value_lanes(width: int) -> int:
    """Vector lanes over the value (head) dimension: the widest of 16, 8, 4, 2, 1 dividing it."""
    return next(w for w in (16, 8, 4, 2, 1) if width % w == 0)


def registers_per_vector(width: int, lanes: int) -> int:
    """Machine registers one ``width``-lane vector of the nest fills on a chip of ``lanes`` float32
    lanes: 2 for the 16 keys of a score vector on AVX2."""
    return max(1, -(-width // lanes))


def tile_registers(args: tuple[int, ...], E: int, lanes: int) -> tuple[int, int]:
    """Machine registers of the score tile and of the output tile of ``args`` on ``lanes`` lanes."""
    _, _, rows, cols, pv_rows, pv_cols = args
    return (
        rows * cols * registers_per_vector(LANES, lanes),
        pv_rows * pv_cols * registers_per_vector(value_lanes(E), lanes),
    )


def register_budget(registers: int) -> int:
    """Machine registers a tile may fill, of the sketch policy's ``registers`` for accumulators: 24 on
    AVX-512, 12 on AVX2; the rest hold K^T, V and Q operands. On a 16-register Zen 3, AVX-512's 6 x 4
    tiles of 16-lane vectors (48 registers each) spilled: 27 GFLOP/s a core against 65-73 with 2 x 2
    and 6 x 1."""
    return min(MAX_TILE_VECTORS, registers)


def shape_of(sch: Schedule, pattern: AttentionPattern) -> tuple[int, int, int, int, int, int]:
    """(B, H, S, L, D, E): batch, query heads, queries, keys, head size, value size."""
    out, qk = sch[pattern.out].op, sch[pattern.qk].op
    assert isinstance(out, ComputeOp) and isinstance(qk, ComputeOp)
    B, H, S, L = qk.shape
    return B, H, S, L, qk.reduce_axis[0].extent, out.shape[3]


def config_problem(sch: Schedule, pattern: AttentionPattern, args: tuple[int, ...]) -> str | None:
    """Why ``args`` cannot configure this attention, or None."""
    _, _, _, _, _, E = shape_of(sch, pattern)
    block_q, block_k, rows, cols, pv_rows, pv_cols = args
    vectors = E // value_lanes(E)
    if block_q % rows or block_q % pv_rows:
        return f"block_q {block_q} is not a multiple of rows {rows} and pv_rows {pv_rows}"
    if block_k % (LANES * cols):
        return f"block_k {block_k} is not a multiple of {LANES} * cols {cols}"
    if rows * cols > MAX_TILE_VECTORS or pv_rows * pv_cols > MAX_TILE_VECTORS:
        return f"a register tile of more than {MAX_TILE_VECTORS} vectors"
    if vectors % pv_cols:
        return f"pv_cols {pv_cols} does not divide the {vectors} vectors of a value row"
    if block_q > 512 or block_k > 2048:
        return "blocks of at most 512 queries and 2048 keys"
    return None


def output_member(sch: Schedule, pattern: AttentionPattern) -> str | None:
    """A member stage, besides the attention's own output, that the program outputs (ONNX Attention's
    ``qk_matmul_output``, say): the rewrite cannot apply then."""
    outputs = {t.op.name for t in sch.outputs}
    return next((n for n in pattern.members if n != pattern.out and n in outputs), None)


def flash_attention(sch: Schedule, stage: str, *args: int) -> None:
    """Apply the rewrite to the attention ending at ``stage`` (its members untouched so far)."""
    if len(args) != len(FLASH_ARGS) or not all(isinstance(a, int) and a > 0 for a in args):
        raise ScheduleError(
            f"flash_attention: expected six positive ints ({', '.join(FLASH_ARGS)}), got {args}"
        )
    out = sch[stage]
    pattern = match_attention(sch, out)
    if pattern is None:
        raise ScheduleError(
            f"flash_attention: stage {stage!r} does not end an attention (contraction, max, exp, sum, "
            "divide, contraction with v)"
        )
    for name in pattern.members:
        st = sch[name]
        if st.relations or st.annotations or st.pragmas or st.attach != ("root",):
            raise ScheduleError(f"flash_attention: member stage {name!r} of {stage!r} was already scheduled")
    inner = output_member(sch, pattern)
    if inner is not None:
        raise ScheduleError(
            f"flash_attention: member stage {inner!r} of {stage!r} is an output (the rewrite never "
            "computes it whole)"
        )
    problem = config_problem(sch, pattern, tuple(args))
    if problem:
        raise ScheduleError(f"flash_attention on {stage!r}: {problem}")
    sch.flash[out.name] = FlashConfig(pattern, *args)
    sch._record(Step("flash_attention", out.name, tuple(args)))


def options(
    sch: Schedule, pattern: AttentionPattern, lanes: int = 16, budget: int = 24
) -> dict[str, list[int]]:
    """The values each decision may take for this attention's shape on a chip of ``lanes`` float32
    lanes whose tiles may fill ``budget`` registers (:func:`register_budget`): each row and column
    count is one that fits with the fewest of the other."""
    _, _, S, L, _, E = shape_of(sch, pattern)
    vectors = E // value_lanes(E)
    padded_s = max(8, S)
    score, value = registers_per_vector(LANES, lanes), registers_per_vector(value_lanes(E), lanes)
    cols = [c for c in (2, 4) if ROWS[0] * c * score <= budget] or [2]
    pv_cols = [c for c in (1, 2, 4, 8) if vectors % c == 0]
    pv_cols = [c for c in pv_cols if ROWS[0] * c * value <= budget] or pv_cols[:1]
    return {
        "block_q": [q for q in BLOCK_Q if q <= padded_s] or [BLOCK_Q[0]],
        "block_k": [k for k in BLOCK_K if k <= max(32, 2 * L)] or [BLOCK_K[0]],
        "rows": [r for r in ROWS if r * cols[0] * score <= budget] or [ROWS[0]],
        "cols": cols,  # 32 or 64 keys a score tile: one vector of keys reloads K^T for every row pair
        "pv_rows": [r for r in ROWS if r * pv_cols[0] * value <= budget] or [ROWS[0]],
        "pv_cols": pv_cols,
    }


def default_config(sch: Schedule, pattern: AttentionPattern, lanes: int = 16) -> tuple[int, ...]:
    """A schedule measured well on a Xeon with AVX-512: 48 x 128 blocks, a 6 x 4 score tile and a 6 x 4
    output tile (24 accumulators each); fewer query rows for short query sequences. Causal: 32 x 64
    blocks and 4 x 4 tiles, whose blocks across the diagonal waste less (4 x 2048 on one thread:
    14.9 ms against 16.1, in turns). With fewer lanes (AVX2's 16 registers) a 2 x 2 score tile and
    an output tile one vector wide (Zen 3, 4 x 2048 x 64 on one core: 73 GFLOP/s, causal 66, against
    27 with the AVX-512 tiles)."""
    _, _, S, _, _, E = shape_of(sch, pattern)
    vectors = E // value_lanes(E)
    block_q, rows = (48, 6) if S >= 48 else (24, 6) if S > 12 else (8, 4)
    block_k = 128
    if pattern.causal_offset is not None and S >= 32:
        block_q, rows, block_k = 32, 4, 64
    if lanes < LANES:
        args = (block_q, block_k, 2, 2, next(r for r in (6, 4, 2) if block_q % r == 0), 1)
    else:
        args = (block_q, block_k, rows, 4, rows, next(c for c in (4, 2, 1) if vectors % c == 0))
    assert config_problem(sch, pattern, args) is None, args
    return args


def apply_default_flash(sch: Schedule, lanes: int = 16) -> set[str]:
    """The default rewrite of every attention in ``sch`` for a chip of ``lanes`` float32 lanes; the
    names of the stages it took over (and of each K stage, which must then stay a plain root stage)."""
    from .attention_pattern import find_attentions

    taken: set[str] = set()
    for pattern in find_attentions(sch):
        if pattern.out in taken or any(n in taken for n in pattern.members):
            continue
        try:
            flash_attention(sch, pattern.out, *default_config(sch, pattern, lanes))
        except ScheduleError:
            continue
        taken.update(pattern.members)
        taken.add(pattern.k_stage)  # packed from its own buffer: not inlined
    return taken


class AttentionRules(BuilderBase):
    flash_style = "cpu"  # the rewrite lowers for CPU-style targets; the GPU builder keeps the stages

    def flash_rule(self) -> None:
        """Rewrite each attention with sampled blocks and tiles; its stages are then done."""
        from .attention_pattern import find_attentions

        if self.flash_style != "cpu" or not getattr(self.p, "flash", True):
            return
        s = self.s
        for pattern in find_attentions(s):
            if any(n in self.done for n in pattern.members) or output_member(s, pattern) is not None:
                continue
            lanes, budget = self.p.lanes, register_budget(self.p.registers)
            opts = options(s, pattern, lanes, budget)
            E = shape_of(s, pattern)[5]
            args: tuple[int, ...] = ()
            for _ in range(32):  # resample until the choices fit together (block_q a multiple of rows)
                args = tuple(self.choose(f"{pattern.out}/flash/{k}", opts[k]) for k in FLASH_ARGS)
                if config_problem(s, pattern, args) is None and max(tile_registers(args, E, lanes)) <= budget:
                    break
                for k in FLASH_ARGS:
                    self.given.pop(f"{pattern.out}/flash/{k}", None)
            else:
                args = default_config(s, pattern, lanes)
                self.used.update({f"{pattern.out}/flash/{k}": v for k, v in zip(FLASH_ARGS, args)})
            flash_attention(s, pattern.out, *args)
            self.done.update(pattern.members)
            # K is packed transposed from its own buffer: a computed K stays a plain root stage.
            self.done.add(pattern.k_stage)
