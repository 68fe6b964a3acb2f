"""The time model: seconds of a lowered kernel on a chip file's chip, from the loop IR alone.

Per store (one statement and the loops around it) it bounds the time by each resource:

- ``compute``: instructions against the ports that run them (FMA units, load and store ports, issue
  width). The vector loop is the one codegen emits in vector types (``<N x float>``: a power of two is
  legalized into registers, any longer extent is cut as codegen cuts it, into native registers and
  a power-of-two tail, :func:`~autosched.codegen.llvm.vector_chunks`), else the innermost real loop
  LLVM's own vectorizer would take; a lane-varying guard on a strided load, or an access the vector loop
  cannot load contiguously, costs lanes, and a guarded load in a loop too short for that vectorizer
  runs lane by lane. Loops LLVM unrolls itself count as unrolled; loads are hoisted out
  of the innermost loops that do not move them (LICM), gathers while they fit (and the copies of one
  gather in unrolled loops are one); an accumulator the innermost real loop does not move stays in a
  register (if that loop stores it once) unless too many are in flight; guards tested there cost a
  branch.
- ``chain``: the accumulators' dependency chains: inside one iteration of the innermost real loop,
  the loops that move the store give independent chains, the others serial FMA-latency steps (plus a
  store-to-load forward when the accumulators live in memory, longer for a min or max, which LLVM
  stores under a mask); short runs overlap in the out-of-order window.
- ``L2``, ``L3``, ..., ``DRAM``: lines that miss each level (:mod:`.traffic`, from the footprints and
  set pressure of :mod:`.reuse`, never more than the loads touch), at the next level's bandwidth. A
  streamed (non-temporal) store writes every line to memory, even when the program fits a cache: a
  layer norm of 1.5 MB whose output streams ran at 22-38 us with memory's bandwidth, against 23 us
  for the best one kept in cache.

A store's time is its largest bound plus ``overlap`` of the others; guarded stores are weighed by how
often their guard holds (:mod:`.guards`). Under a parallel loop of extent P on C cores the busiest core
runs ceil(P / C) of the P iterations; memory bandwidth is shared. Each parallel region entered and each
heap allocation costs a fixed time. The constants of :class:`Calibration` were fitted to measurements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..codegen.llvm import vector_chunks
from ..codegen.llvm_stream import stream_store
from ..codegen.llvm_vector import affine_index, why_not_vectorizable
from ..lower.ir import Allocate, Buffer, For, IfThenElse, Load, PrimFunc, Seq, Stmt, Store
from ..lower.stmt_visit import walk_stmts
from ..te.expr import Binary
from .chip import ChipSpec
from .guards import guard_share, guard_uops
from .llvm_passes import (
    auto_vector_lanes,
    auto_vectorized,
    executions,
    fully_unrolled,
    gathers,
    vector_access,
)
from .ops import count_ops
from .reuse import DTYPE_BYTES, Access, accesses
from .traffic import cache_traffic

# Bumped whenever a change to the model (or its calibration) changes modeled times: it is part of a
# simulated chip's fingerprint, so a resumed log never mixes the times of two models.
SIM_MODEL_VERSION = 17
HEAP_ABOVE_BYTES = 64 * 1024  # codegen: larger buffers come from aligned_alloc, smaller ones from the stack


@dataclass(frozen=True)
class Calibration:
    """Constants fitted to measurements (see benchmarks/simulator.py), not chip facts."""

    overlap: float = 0.25  # fraction of the non-dominant bounds that does not hide under the largest
    issue_width: int = 4  # instructions a core starts per cycle
    div_ops: int = 8  # FMA-port slots of one vector division
    reserved_registers: int = 4  # vector registers kept for operands (not accumulators)
    cache_fill: float = 0.9  # share of a cache a tile may fill before it misses (associativity, others)
    loop_uops: int = 2  # increment and compare-branch per iteration of a real loop
    call_us: float = 0.3  # entering the kernel
    unroll_threshold: float = 100.0  # instructions of a loop body LLVM still unrolls fully
    spill_store_cycles: float = 1.8  # a spilled accumulator's store and reload, in store-port cycles
    # LLVM's vectorizer on a guarded load that is not contiguous (a pool's stride-2 padded taps: inserts
    # and permutes around masked loads): lanes / this; 3 or 4 rank the pool candidates best, 2 or 6 worse
    guarded_lane_divisor: int = 4
    set_conflicts: bool = True  # model power-of-two strides crowding a few cache sets
    # share of the extra reloads a crowded set misses: slope x (lines - ways) / ways, at most all. 1
    # ranks Zen 3's matmul candidates 0.656 -> 0.697 (its 10-row tiles ran as fast as 8-row ones), and
    # dense 0.821 -> 0.843, Zen 5's within 0.005 of before (model 16 reloaded them all: a slope of at
    # least the ways)
    conflict_slope: float = 1.0
    window_uops: float = 200.0  # instructions in flight: chains shorter than this overlap
    alloc_us: float = 0.2  # one heap allocation and free
    # exp without AVX-512 (no vrndscaleps, vscalefps): the portable rounding and 2**n bit tricks
    # (codegen.llvm_intrinsics: about 23 vector instructions against 15; measured at 13 cycles an
    # 8-lane vector under -mcpu=haswell against 10 a 16-lane one with AVX-512)
    portable_exp_ops: float = 7.0
    # a min or max accumulator kept in memory: LLVM stores it under a mask (only the lanes that changed),
    # and a masked store does not forward to the load of the next update. Measured here, a dependent
    # load-compare-store step: 16 cycles against 9 with a plain store (AVX-512 mask registers), 21
    # against 10 with AVX's vmaskmovps
    masked_store_cycles: float = 7.0
    avx_masked_store_cycles: float = 11.0


@dataclass
class StoreTime:
    """The bounds of one store (seconds, on the cores that run it) and the time they give."""

    buffer: str
    loops: tuple[str, ...]  # "name extent kind", outermost first
    executions: float
    bounds: dict[str, float]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    reloads: dict[str, str] = field(default_factory=dict)  # level -> the loop that brings its tile in again

    @property
    def dominant(self) -> str:
        return max(self.bounds, key=lambda k: self.bounds[k]) if self.bounds else "none"


@dataclass
class Prediction:
    """The modeled time of one kernel, with the stores it comes from (``explain`` prints them)."""

    chip: ChipSpec
    name: str
    stores: list[StoreTime]
    fixed_s: float
    seconds: float


def predict(func: PrimFunc, chip: ChipSpec, calib: Calibration | None = None) -> Prediction:
    """Modeled seconds of one run of ``func`` on ``chip``.

    Example: ``predict(lower(s, args), chip).seconds``.
    """
    m = _Model(chip, calib or Calibration())
    m.total_bytes = sum(b.size * DTYPE_BYTES.get(b.dtype, 4) for b in func.params)
    m.visit(func.body, [])
    fixed_us = m.calib.call_us + m.regions * chip.parallel_overhead_us + m.heap_allocs * m.calib.alloc_us
    fixed = fixed_us * 1e-6
    total = fixed + sum(s.seconds for s in m.stores)
    return Prediction(chip, func.name, m.stores, fixed, total)


def _loop_label(lp: For) -> str:
    return f"{lp.var.name} {lp.extent}" + ("" if lp.kind == "serial" else f" {lp.kind}")


class _Model:
    def __init__(self, chip: ChipSpec, calib: Calibration):
        self.chip, self.calib = chip, calib
        self.stores: list[StoreTime] = []
        self.memo: dict[int, dict[int, float]] = {}
        self.vec_ok: dict[int, bool] = {}
        self.sole: dict[tuple[int, int], bool] = {}
        self.regions = 0.0
        self.heap_allocs = 0.0
        self.alloc_depth: dict[int, int] = {}  # buffer -> the loops around its allocation
        self.total_bytes = 0
        # exp as codegen emits it: AVX-512's rounding and scaling instructions, else the bit tricks
        self.exp_extra = 0.0 if "avx512f" in chip.features else calib.portable_exp_ops
        # masked stores: AVX-512's, AVX's vmaskmovps, or none (a blend and a plain store forward fine)
        feats = chip.features
        self.masked_store_extra = (calib.masked_store_cycles if "avx512f" in feats
                                   else calib.avx_masked_store_cycles if "avx" in feats else 0.0)  # fmt: skip
        self.avx_masked_store = "avx" in feats and "avx512f" not in feats

    def visit(self, s: Stmt, loops: list[For], weight: float = 1.0, guards: tuple = ()) -> None:
        """``weight``: the share of the loops' iterations that reach ``s``; ``guards``: the conditions
        tested on the way, each with the number of loops around it."""
        if isinstance(s, For):
            if s.extent <= 0:
                return
            if s.kind == "parallel" and not any(lp.kind == "parallel" for lp in loops):
                self.regions += math.prod(lp.extent for lp in loops)
            self.visit(s.body, [*loops, s], weight, guards)
        elif isinstance(s, Seq):
            for x in s.stmts:
                self.visit(x, loops, weight, guards)
        elif isinstance(s, IfThenElse):
            share = guard_share(s.cond, loops)
            if share > 0:
                self.visit(s.then, loops, weight * share, (*guards, (s.cond, len(loops))))
            if s.otherwise is not None and share < 1:
                self.visit(s.otherwise, loops, weight * (1 - share), (*guards, (s.cond, len(loops))))
        elif isinstance(s, Allocate):
            self.alloc_depth[id(s.buffer)] = len(loops)
            nbytes = s.buffer.size * DTYPE_BYTES.get(s.buffer.dtype, 4)
            if nbytes > HEAP_ABOVE_BYTES:
                self.heap_allocs += math.prod(lp.extent for lp in loops)
            self.total_bytes += nbytes
            self.visit(s.body, loops, weight, guards)
        elif isinstance(s, Store):
            st = self.store(s, loops, guards)
            if weight < 1:
                st.bounds = {k: v * weight for k, v in st.bounds.items()}
                st.seconds *= weight
                st.executions *= weight
            self.stores.append(st)

    def vector_loop(self, loops: list[For]) -> For | None:
        """The loop codegen emits in vector types: the outermost vectorized one it can vectorize."""
        for lp in loops:
            if lp.kind == "vectorized" and lp.extent > 1:
                ok = self.vec_ok.get(id(lp))
                if ok is None:
                    ok = self.vec_ok[id(lp)] = why_not_vectorizable(lp) is None
                return lp if ok else None
        return None

    # One store ----------------------------------------------------------------------------------
    def store(self, s: Store, loops: list[For], guards: tuple = ()) -> StoreTime:
        chip, cal = self.chip, self.calib
        lanes = chip.lanes
        n_exec = float(math.prod(lp.extent for lp in loops))
        vec = self.vector_loop(loops)
        loads: list[Load] = []
        vec_var = vec.var if vec is not None else None
        guess = next((lp.var for lp in reversed(loops) if lp.kind != "unrolled" and lp is not vec), None)
        exp_extra = self.exp_extra
        fp_ops, fp_scalar, int_ops = count_ops(s.value, loads, vec_var, guess, cal.div_ops, False, exp_extra)
        acc_list = accesses(s, loads, self.memo)
        store_acc = acc_list[0]
        is_acc = any(ld.buffer is s.buffer for ld in loads)
        notes: list[str] = []
        per_lane = fp_ops + len(loads) + 1
        body = (math.ceil(vec.extent / lanes) * per_lane if vec else per_lane) + fp_scalar + int_ops
        flat = fully_unrolled(loops, body, vec, cal.unroll_threshold)
        real = [lp for lp in loops if lp.kind != "unrolled" and lp is not vec and lp.extent > 1
                and id(lp) not in flat]  # fmt: skip
        auto_vec = vec is None and auto_vectorized(s, loads, real, store_acc, lanes)
        inner = real[-1].var if real else None
        # lanes codegen left serial and LLVM unrolls: index arithmetic folds into each copy's constants
        lane_serial = vec is None and loops[-1].kind == "vectorized" and id(loops[-1]) in flat
        fp_ops, fp_scalar, int_ops = count_ops(
            s.value, [], real[-1].var if auto_vec else vec_var, inner, cal.div_ops, lane_serial, exp_extra
        )
        if auto_vec:
            notes.append(f"loop {real[-1].var.name} left to LLVM's loop vectorizer")
        if vec is not None:
            # codegen's pieces: a power of two whole (legalized into registers), a longer odd extent
            # in native registers and a power-of-two tail (56 -> 16+16+16+8); loads and stores alike
            pieces = vector_chunks(vec.extent, lanes)
            vlen = vec.extent
            regs_per_group = len(pieces) if len(pieces) > 1 else math.ceil(vec.extent / lanes)
            mem_pieces = vec.extent // lanes + bin(vec.extent % lanes).count("1")
            if vec.extent % lanes and vec.extent > lanes:
                fill = vec.extent / (regs_per_group * lanes)
                notes.append(f"vector {vec.var.name} of {vec.extent} fills {fill:.0%} of its registers")
        elif auto_vec:
            vlen = auto_vector_lanes(s, real[-1].var, lanes, cal.guarded_lane_divisor)
            regs_per_group, mem_pieces = 1, 1
        else:
            vlen, regs_per_group, mem_pieces = 1, 1, 1
        groups = n_exec / vlen  # executions of the (vector) body
        vloop = vec or (real[-1] if auto_vec else None)
        # ``real``: the loops that really iterate (not unrolled, not vector): LICM acts on them.
        # Accumulator promoted to a register across the innermost real loops it does not move with.
        promoted = 1.0
        for lp in reversed(real):
            if is_acc and not store_acc.depends_on(id(lp.var)) and self.sole_store(lp, s.buffer):
                promoted *= lp.extent
            else:
                break
        spilled = False
        if promoted > 1 and real:
            inside = loops[loops.index(real[-1]) + 1 :]
            moving = [lp for lp in inside if store_acc.depends_on(id(lp.var))]  # distinct accumulators
            elems = math.prod(lp.extent for lp in moving) * (1 if vloop is None or vloop in inside else vlen)
            in_flight = elems / (vlen / regs_per_group)
            if in_flight > chip.vector_registers - cal.reserved_registers:  # spilled: loaded and stored again
                promoted, spilled = 1.0, True
        # ... and once for the updates that follow each other in straight-line code
        straight = self.straight_line_updates(loops, real, vec, store_acc, regs_per_group) if is_acc else 1.0
        stores = groups * mem_pieces / (promoted * (1.0 if spilled else straight))
        n_loads, shuffles = 0.0, 0.0
        # per access, how often its loads run and the loop one load spans: it cannot miss more lines
        # than that (a load LICM hoisted out of a loop touches no cache in that loop's iterations)
        touches: list[tuple[float, list[For]] | None] = [None] * len(acc_list)
        for a_i, acc in enumerate(acc_list):
            if not acc.read:
                continue
            if acc.buffer is s.buffer:
                n_loads += stores
                continue
            per, shuf = vector_access(acc, vloop, mem_pieces, lanes)
            if (
                vloop is not None
                and shuf >= vloop.extent
                and not self.gather_hoisted(acc, loops, vloop, real)
            ):
                reps = gathers(acc, loops, vloop, real, n_exec)
            else:
                reps = executions(acc, loops, vloop, flat)
                if auto_vec and vloop is not None:
                    reps *= vloop.extent / lanes
            n_loads += reps * per
            shuffles += reps * shuf
            touches[a_i] = (reps, [vloop] if vloop is not None else [])
        if vec is not None:
            st = affine_index(s.buffer, s.indices, vec.var)
            if st is None or st.coeff > 4 or st.coeff < 0:  # scattered lane by lane
                stores *= vlen / mem_pieces
                shuffles += groups * vlen
            elif st.coeff == 0:  # a reduction over the lanes: a tree of log2(N) vector ops
                fp_ops += math.log2(vlen) + 1
        if vec is None and not auto_vec:  # scalar code: every float op is one FMA-port slot
            fp_ops, fp_scalar = fp_ops + fp_scalar, 0.0
        fp = groups * (regs_per_group * fp_ops + fp_scalar)
        iters = 1.0  # iterations of the innermost real loop: its increment and branch
        if real:
            iters = n_exec / math.prod(lp.extent for lp in loops[loops.index(real[-1]) + 1 :])
        iters /= lanes if auto_vec else 1
        uops = fp + n_loads + stores + shuffles + cal.loop_uops * iters + groups * int_ops
        uops += guard_uops(guards, loops, vloop if auto_vec else None, inner, chip.lanes)
        store_cost = cal.spill_store_cycles if spilled else 1.0
        masked = vloop is not None and is_acc and isinstance(s.value, Binary) and s.value.op in ("min", "max")
        if masked and self.avx_masked_store:  # vmaskmovps: as slow as the chip's store unit makes it
            store_cost = max(store_cost, chip.masked_store_cycles)
        cycles = max(fp / chip.fma_units, n_loads / chip.load_ports, stores * store_cost / chip.store_ports,
                     uops / cal.issue_width)  # fmt: skip
        per_update = uops / max(1.0, groups * regs_per_group)
        in_regs = promoted * (1.0 if spilled else straight)  # held across real loops, or straight-line
        chain = self.chain(loops, vec, vloop, vlen / regs_per_group, is_acc, store_acc, in_regs, real,
                           per_update, notes, masked)  # fmt: skip
        par, per_core = self.parallel(loops)
        clock = chip.clock_ghz * 1e9
        bounds = {"compute": cycles / clock * per_core, "chain": chain * n_exec / clock * per_core}
        reloads: dict[str, str] = {}
        moved = cache_traffic(self.chip, acc_list, loops, n_exec, par, per_core, self.total_bytes, reloads,
                              fill=cal.cache_fill, conflicts=cal.set_conflicts, touches=touches,
                              conflict_slope=cal.conflict_slope)  # fmt: skip
        bounds.update(moved)
        if loops and stream_store(loops[-1]) is s:  # non-temporal: every line written goes to memory
            single = self.chip.single_core_memory_bandwidth_gbs or self.chip.memory_bandwidth_gbs
            bw = min(self.chip.memory_bandwidth_gbs, single * par) * 1e9
            bounds["DRAM"] = max(bounds.get("DRAM", 0.0), n_exec * DTYPE_BYTES.get(s.buffer.dtype, 4) / bw)
        big = max(bounds.values())
        seconds = big + cal.overlap * (sum(bounds.values()) - big)
        labels = tuple(map(_loop_label, loops))
        return StoreTime(s.buffer.name, labels, n_exec, bounds, seconds, notes, reloads)

    def sole_store(self, lp: For, buf: Buffer) -> bool:
        """Whether ``lp``'s body stores to ``buf`` once: LICM keeps an accumulator in registers across
        a loop only then (an initialisation or a write-back of the same buffer in there stops it)."""
        key = (id(lp), id(buf))
        got = self.sole.get(key)
        if got is None:
            n = sum(isinstance(x, Store) and x.buffer is buf for x in walk_stmts(lp.body))
            got = self.sole[key] = n <= 1
        return got

    def straight_line_updates(self, loops: list[For], real: list[For], vec: For | None, store_acc: Access,
                              regs: int) -> float:  # fmt: skip
        """How many updates of one accumulator follow each other in one iteration of the innermost real
        loop, where the code is straight-line: GVN forwards the accumulator from one copy to the next and
        DSE keeps the last store, so it is loaded and stored once for all of them (a max pool's assembly,
        ry and rx unrolled: one store an output vector, not nine). All the non-moving loops count when
        nothing moving is nested inside them; else only those the schedule unrolled (the loops LLVM
        unrolls itself around several live accumulators did not rank conv candidates better), and none
        when the accumulators of the whole body do not fit in registers (a dense tile of 4 x 4 x 4
        registers, 32 k steps unrolled inside: modeled 2.6 ms with them held, measured 8.0 ms)."""
        inside = loops[loops.index(real[-1]) + 1 :] if real else loops
        same, unrolled, live, nested, accumulators = 1, 1, 1, False, regs
        for lp in inside:
            if lp is vec or lp.extent <= 1:
                continue
            if not store_acc.depends_on(id(lp.var)):
                same, nested = same * lp.extent, True
                unrolled *= lp.extent if lp.kind == "unrolled" else 1
            else:
                accumulators *= lp.extent
                live *= lp.extent if nested else 1
        if accumulators > self.chip.vector_registers - self.calib.reserved_registers:
            return 1.0  # LLVM interleaves the unrolled copies: all of them are in flight, and spill
        return float(same if live == 1 else unrolled)

    def gather_hoisted(self, acc: Access, loops: list[For], vloop: For, real: list[For]) -> bool:
        """Whether LICM keeps a gathered vector across the innermost real loop: when that loop does not
        move it and the distinct gathers inside it (one per unrolled step that moves it) fit in registers."""
        if not real or acc.depends_on(id(real[-1].var)):
            return False
        inside = loops[loops.index(real[-1]) + 1 :]
        live = math.prod(lp.extent for lp in inside if lp is not vloop and acc.depends_on(id(lp.var)))
        return live <= (self.chip.vector_registers - self.calib.reserved_registers) // 2

    def chain(self, loops: list[For], vec: For | None, vloop: For | None, lanes_used: float, is_acc: bool,
              store_acc: Access, promoted: float, real: list[For], uops_per_update: float,
              notes: list[str], masked: bool = False) -> float:  # fmt: skip
        """Cycles per execution that the accumulators' dependency chains need. Inside one iteration of
        the innermost real loop R the code is straight-line: its accumulators (the loops there that move
        the store) are independent chains, each updated once per non-moving loop iteration there, FMA
        latency apart. Chains carried across R's iterations serialise them (not those of a tile allocated
        inside R: a depthwise conv's best under -mcpu=haswell, modeled 0.141 ms with its 7 x-tiles in one
        chain, measured 0.038); otherwise R's iterations overlap as far as the out-of-order window reaches."""
        if not is_acc:
            return 0.0
        chip, lat = self.chip, float(self.chip.fma_latency_cycles)
        moves = [store_acc.depends_on(id(lp.var)) or lp.extent == 1 for lp in loops]
        if all(moves):
            return 0.0
        red = max(k for k in range(len(loops)) if not moves[k])
        if loops[red] is vec and vec is not None:  # lanes folded as a tree, one scalar chain per vector body
            return (lat + chip.store_forward_cycles) / vec.extent
        r = loops.index(real[-1]) if real else -1
        inside = loops[r + 1 :]
        elems = float(math.prod(lp.extent for lp, mv in zip(inside, moves[r + 1 :]) if mv))
        if vloop is not None and vloop not in inside:
            elems *= lanes_used  # the vector's lanes are independent chains too
        updates = float(math.prod(lp.extent for lp, mv in zip(inside, moves[r + 1 :]) if not mv))
        accumulators = elems / lanes_used
        # a tile allocated inside R is a fresh one each iteration: its chains start afresh
        carried = r >= 0 and not moves[r] and self.alloc_depth.get(id(store_acc.buffer), 0) <= r
        in_regs = promoted > 1 or not carried
        if accumulators > chip.vector_registers - self.calib.reserved_registers:
            in_regs = False
            notes.append(f"{accumulators:.0f} accumulators spill past {chip.vector_registers} registers")
        if not in_regs:
            lat += chip.store_forward_cycles + (self.masked_store_extra if masked else 0.0)
        # one run of R (or one iteration, when nothing is carried) is what must finish in order
        chain_len = loops[r].extent * updates if carried else updates
        overlap = max(1.0, self.calib.window_uops / (chain_len * accumulators * uops_per_update))
        return lat / (elems * overlap)

    def parallel(self, loops: list[For]) -> tuple[int, float]:
        """(cores used, share of the work the busiest core runs)."""
        par = next((lp for lp in loops if lp.kind == "parallel"), None)
        if par is None:
            return 1, 1.0
        used = min(par.extent, self.chip.cores)
        return used, math.ceil(par.extent / self.chip.cores) / par.extent
