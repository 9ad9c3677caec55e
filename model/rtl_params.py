"""`RtlParams`: the latencies of the generated RTL that the cycle model's schedule leaves open.

The schedule of docs/microarchitecture.md fixes the order of everything; how
many cycles each hand-over takes is the hardware's to say. `RtlParams.of(plan)`
asks the blocks the Plan generates (`attenio.hdl.core.CoreTiming`,
`attenio.hdl.top.TopTiming`), so the model follows any change of a pipeline
without a number to update here, and a field that no block publishes (a timing
field renamed, say) is an error rather than a stale number.
"""

from dataclasses import dataclass, fields

from attenio import validate
from attenio.errors import ConfigError

__all__ = ["RtlParams"]


@dataclass(frozen=True)
class RtlParams:
    """The latencies of the RTL that the schedule leaves open, as named knobs.

    Every field but `block_gap` is the hardware's: `RtlParams.of(plan)` takes it from
    the block that builds the stage (`CoreTiming`, `TopTiming`), and there is no
    default to fall back on. What-if runs of the model start from the hardware's and
    change what they ask about: `RtlParams.of(plan, lane_latency=30)` or
    `dataclasses.replace(RtlParams.of(plan), ...)`. The memory the model runs on
    (bandwidth, latency, a per-burst cost, one beat a cycle per port) is not the RTL's
    and is no field here: `attenio.model.memmodel.Memory`, `simulate(memory=...)`.

    lane_latency        U_j may enter line_skew + lane_rows + lane_latency cycles after
                        the cycle following S_j's last word at the array's entry (the
                        score's operand and product registers, the lane's stages to
                        the MACs' bus registers, the replay's reaction and entry
                        register)
    lane_busy_tail      cycles a lane still has a row in flight after issuing its last
                        one (what `exp_busy` counts)
    lane_start          cycles from the lanes' earliest read of S_j's scores (the model's
                        SM start) to their first row in flight (the start pulse's register,
                        the lane's run register)
    line_skew           cycles from MAC 0 to the last MAC of a line
    lane_rows           rows each lane reads per softmax pass: r*q/(L s), L the lanes of a
                        line (`attenio.validate.lanes_per_line`)
    drain_start         cycles from the block's last V word at the last MAC to the
                        normalizer's first read (the O update written, the start)
    normalizer_latency  cycles from a drain read to its byte in the output FIFO
    drain_row           cycles the drain takes a row of O and l (d/F: F elements
                        finalized a cycle, `attenio.hdl.normalizer.Normalizer.finalizers`)
    read_start          the model's issue time of the first read (`TopTiming`: the
                        sequencer's first command through the burst splitter to AR,
                        plus the read path's offset to the array's clock)
    feed_start          cycles from LAUNCH to the KV buffer taking the first block (from
                        then on a starved array counts as `mem_stall`)
    write_tail          cycles from the last O byte entering the normalizer's FIFO to
                        `done`, beyond the memory's write response (`Memory.write_latency`)
    feed_pad_rows       True: the last, partial Q block feeds its rows past N as zeros
                        (Qload always a*d cycles); False: only the valid rows
                        (rows_valid*d cycles), as the core's `feed` port takes them
    row_issue           cycles from a row's launch to its first word at the array (the
                        replay's); the next block's first K row may launch in the
                        cycle after the drain's last read of O and l
    row_ready           cycles from a row's last element entering the KV buffer to its
                        launch at the earliest (the buffer's `row` from registers)
    row_refill          cycles from the replay's release of a KV buffer half (the cycle
                        of its last word's issue) to the half taking the next row's first
                        element at the earliest
    room_issue          cycles from a row's last beat leaving the read FIFO to the model's
                        issue of the row `depth` later (the reader's room register, then
                        the read path's offset: `TopTiming.read_offset`)
    beat_leave          a row's last beat leaves the read FIFO at the earliest this many
                        cycles before the model's arrival time of the row
    block_command       cycles from the core taking a block's command (the cycle after
                        the previous block's last element entered the KV buffer) to the
                        model's issue of the block's first read
    block_fill          cycles from the core taking a block's command to the KV buffer
                        taking its first element
    feed_lead           cycles by which a beat's last element leaves the unpacker before
                        the KV buffer takes it, when the buffer sets the pace (the feed's
                        register slice: `StreamSlice.lead`)
    table_turn          paged K/V: cycles from a table beat's R handshake to the AR of the K
                        row it gives the page of (`TopTiming.table_turn`)
    desc_turn           a batch: cycles from a run's end to the next run's LAUNCH but for
                        the descriptor's read in memory (`TopTiming.desc_turn`)
    score_period        cycles per chunk of a K row (`CoreTiming.score_period`): r for
                        int8's slot-by-slot replay, max(r, L_acc) for a float format;
                        a what-if may set None, read as r
    banks               score and (P, alpha) banks (the Plan's `banks`, B): S runs B - 1
                        K rows ahead of U, so the lanes have (B - 1) (P + r) d/s cycles
                        of other work to cover their latency
    block_gap           the model's what-if, no block's: cycles a controller would idle
                        between a block's U(N-1) and the next block's Qload. The RTL has
                        no such bubble (the core takes the next block's command while the
                        previous one computes; the hand-over is `block_command` and
                        `block_fill`), so `RtlParams.of` sets 0 unless asked otherwise
    """

    lane_latency: int
    lane_busy_tail: int
    lane_start: int
    line_skew: int
    lane_rows: int
    drain_start: int
    normalizer_latency: int
    drain_row: int
    read_start: int
    feed_start: int
    write_tail: int
    feed_pad_rows: bool
    row_issue: int
    row_ready: int
    row_refill: int
    room_issue: int
    beat_leave: int
    block_command: int
    block_fill: int
    feed_lead: int
    table_turn: int
    desc_turn: int
    score_period: int | None
    banks: int
    block_gap: int

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type is bool or f.type == "bool":
                validate.flag("RtlParams", f.name, v)
            elif not (v is None and f.name == "score_period"):
                validate.integer("RtlParams", f.name, v, lo=0)

    @classmethod
    def of(cls, plan, *, block_gap=0, **overrides):
        """The latencies of the RTL generated for `plan`, from its blocks; `block_gap` and
        `overrides` (fields by name) for what-if runs.

        Raises ConfigError for a budget whose EXP units the RTL cannot spread over its
        lanes (`attenio.validate.lanes_per_line`, as `attenio.hdl.top.check_plan` does) or
        a mapping whose O updates would overlap (`attenio.hdl.core.o_update_problem`),
        and ValueError naming a field that no block publishes. A float format with the
        paper's 16-bit O accounting (analysis only, no RTL) takes the latencies of the
        fp32-O datapath the RTL builds."""
        import dataclasses

        from attenio.formats import FloatFormat
        from attenio.hdl.core import CoreTiming, o_update_problem
        from attenio.hdl.formats import arith_of
        from attenio.hdl.top import TopTiming

        b, w = plan.budget, plan.workload
        fmt = plan.config.format
        if isinstance(fmt, FloatFormat) and fmt.o_acc_bits != 32:
            fmt = dataclasses.replace(fmt, o_acc_bits=32)
        arith = arith_of(fmt, max_seq_len=w.max_keys, head_dim=w.head_dim)
        lanes = validate.lanes_per_line(exp_units=b.exp_units, mac_lines=b.mac_lines,
                                        macs_per_line=b.macs_per_line, owner="budget",
                                        error=ConfigError)
        core = CoreTiming.of(arith, macs_per_line=b.macs_per_line,
                             rows_per_mac=plan.rows_per_mac, lanes=lanes, split=plan.split,
                             head_dim=w.head_dim)
        problem = o_update_problem(core, rows_per_mac=plan.rows_per_mac, head_dim=w.head_dim,
                                   split=plan.split, banks=plan.banks)
        if problem:
            raise ConfigError(f"mapping: {problem}")
        top = TopTiming.of(plan, arith)
        published = {f.name: getattr(timing, f.name) for timing in (core, top)
                     for f in fields(timing)}
        published["banks"] = plan.banks
        published["block_gap"] = block_gap
        missing = [f.name for f in fields(cls) if f.name not in published]
        if missing:
            raise ValueError(f"RtlParams.of: no block publishes {', '.join(missing)} "
                             f"(CoreTiming, TopTiming)")
        return cls(**{f.name: published[f.name] for f in fields(cls)} | overrides)
