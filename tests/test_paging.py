"""Paged K/V (docs/microarchitecture.md, "Paged K/V and ragged batches"): the formats of
`attenio.regmap`, the Plan's table bytes, and the read sequencer's table walk held to its
twin (`read_schedule(page_rows=...)`) under random back-pressure, its table beats served
by a small in-order memory."""

import dataclasses
import json

import pytest

from amaranth_sim import run_clocked
from attenio.analysis import block_keys
from attenio.config import preset
from attenio.errors import ConfigError
from attenio.gen.regmap import regmap_c_header
from attenio.hdl.sequencer import TABLE, Kind, ReadSequencer, read_schedule
from attenio.plan import make_plan
from attenio.regmap import (DESCRIPTOR_BYTES, DESCRIPTOR_FIELDS, ErrorCode, pack_descriptor,
                            pack_table, paged_row_addr, register_map, table_beats, table_pages,
                            unpack_descriptor)

from test_sequencer import ROW_BYTES, set_run


def paged(config, page_rows):
    return dataclasses.replace(config, budget=dataclasses.replace(config.budget,
                                                                  page_rows=page_rows))


def test_a_descriptor_is_eight_words_and_round_trips():
    fields = {name.lower(): 11 * i + 1 for i, (name, _) in enumerate(DESCRIPTOR_FIELDS)}
    raw = pack_descriptor(**fields)
    assert len(raw) == DESCRIPTOR_BYTES == 32
    assert unpack_descriptor(raw) == fields
    assert raw[4:8] == (12).to_bytes(4, "little")          # SEQ_LEN, the second word
    with pytest.raises(ValueError, match="unknown field"):
        pack_descriptor(kv_lenn=3)
    with pytest.raises(ValueError, match="kv_len must fit 32 bits, not 4294967296"):
        pack_descriptor(kv_len=2 ** 32)


def test_a_table_is_its_pages_and_a_row_is_found_through_it():
    table = [0x4000, 0x1000, 0x9000]
    assert pack_table(table) == bytes.fromhex("00400000" "00100000" "00900000")
    assert table_pages(33, 16) == 3 and table_pages(32, 16) == 2
    # 64-bit beats hold two entries: 3 pages, 2 beats; 128-bit: one beat
    assert table_beats(33, 16, 8) == 2 and table_beats(33, 16, 16) == 1
    assert paged_row_addr(table, 17, page_rows=16, base=0x40, head=2, head_stride=0x200,
                          row_stride=0x10) == 0x1000 + 0x40 + 0x400 + 0x10


def test_only_a_paged_build_has_the_paging_registers():
    small = make_plan(preset("small"))
    names = [r.name for r in register_map(small)]
    assert not {"KV_TABLE", "PAGE_ROWS", "DESC_COUNT"} & set(names)
    rmap = register_map(make_plan(paged(preset("small"), 16)))
    assert rmap["PAGE_ROWS"].value == 16
    assert [r.name for r in rmap if r.name not in names] == [
        "KV_TABLE", "KV_TABLE_LEN", "PAGE_LIMIT", "DESC_BASE", "DESC_COUNT", "DESC_INDEX", "PAGE_ROWS"]
    header = regmap_c_header(rmap)
    assert "#define ATTENIO_DESC_KV_LEN_OFFSET 8u" in header
    assert f"#define ATTENIO_ERROR_TABLE_SHORT {ErrorCode.TABLE_SHORT.value}u" in header


def test_page_rows_must_be_a_power_of_two():
    with pytest.raises(ConfigError, match="budget: page_rows \\(0: contiguous K/V\\) must be "
                                          "a power of two from 1 to 65536, not 12"):
        paged(preset("small"), 12)


@pytest.mark.parametrize("seq_len, heads, kv_len, causal, grouped", [
    (1, 8, 200, False, True), (1, 8, 17, False, False), (40, 2, 64, True, False),
    (16, 8, 100, True, True)])
@pytest.mark.parametrize("page_rows", [1, 16, 32])
def test_the_plan_counts_each_blocks_table_beats(seq_len, heads, kv_len, causal, grouped,
                                                 page_rows):
    """The Plan's table bytes are the twin's table reads (whole beats), block by block."""
    config = paged(dataclasses.replace(
        preset("small"), workload=dataclasses.replace(preset("small").workload, seq_len=64,
                                                      kv_len=256, heads=8, kv_heads=1)),
        page_rows)
    plan = make_plan(config)
    beat = config.budget.axi_data_bits // 8
    traffic = plan.traffic_at(seq_len=seq_len, heads=heads, kv_len=kv_len, causal=causal,
                              grouped=grouped, group=8)
    gb = 8 if grouped else 1
    cmds, _ = read_schedule(seq_len=seq_len, heads=heads, block_rows=plan.a, q=(0, 0, 0),
                            k=(0, 0, 0), v=(0, 0, 0), causal=causal, kv_len=kv_len, group=8,
                            grouped=grouped, page_rows=page_rows, table=[0] * 256,
                            beat_bytes=beat)
    table_reads = sum(kind == TABLE for kind, _ in cmds)
    assert table_reads == heads // gb * sum(
        table_beats(n, page_rows, beat)
        for _, _, n in block_keys(seq_len, plan.a // gb, causal=causal, n_kv=kv_len))
    assert dict((t.tensor, t.bytes) for t in traffic.reads)["table"] == table_reads * beat
    contiguous = make_plan(paged(config, 0)).traffic_at(
        seq_len=seq_len, heads=heads, kv_len=kv_len, causal=causal, grouped=grouped, group=8)
    assert traffic.read_bytes - contiguous.read_bytes == table_reads * beat


def check_paged_sequencer(rng, *, seq_len, heads, block_rows, kv_len, causal=False, group=1,
                          grouped=False, banks=2, page_rows=4, data_width=64, page_limit=0,
                          bad_page=None):
    """The read sequencer walking a shuffled table under random back-pressure on its
    commands, kinds, blocks and output beats, and random delays of the beats it reads;
    returns its page_error."""
    beat = data_width // 8
    n_pages = table_pages(kv_len, page_rows)
    kv_heads = -(-heads // group)
    slot = 2 * kv_heads * page_rows * ROW_BYTES         # [K heads | V heads] a slot
    order = rng.permutation(n_pages + 5)[:n_pages]
    table = [0x10_0000 + int(i) * slot for i in order]
    if bad_page is not None:
        table[bad_page[0]] = bad_page[1]
    table_base = 0x8000 + beat * int(rng.integers(0, 16))
    image = pack_table(table) + bytes(beat)
    t = {"q": (0x40_0000, seq_len * ROW_BYTES, ROW_BYTES),
         "k": (0, page_rows * ROW_BYTES, ROW_BYTES),
         "v": (kv_heads * page_rows * ROW_BYTES, page_rows * ROW_BYTES, ROW_BYTES),
         "o": (0x50_0000, seq_len * ROW_BYTES, ROW_BYTES)}
    expect, expect_blocks = read_schedule(
        seq_len=seq_len, heads=heads, block_rows=block_rows, q=t["q"], k=t["k"], v=t["v"],
        causal=causal, kv_len=kv_len, group=group, grouped=grouped, banks=banks,
        page_rows=page_rows, table=table, table_base=table_base, beat_bytes=beat,
        page_limit=page_limit)
    dut = ReadSequencer(addr_width=32, block_rows=block_rows, row_bytes=ROW_BYTES,
                        max_seq_len=1024, banks=banks, page_rows=page_rows,
                        data_width=data_width)
    cmds, kinds, blocks, out_beats = [], [], [], []
    state = {}

    async def tb(ctx):
        set_run(ctx, dut.run, seq_len, heads, t, causal, kv_len, group, grouped, block_rows)
        ctx.set(dut.run.table, table_base)
        ctx.set(dut.run.table_len, n_pages)
        ctx.set(dut.run.page_limit, page_limit)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        pending = []        # beats to deliver, in order: (earliest cycle, data, last, table)
        for cyc in range(40 * len(expect) + 200):
            ctx.set(dut.cmd.ready, int(rng.random() < 0.6))
            ctx.set(dut.kind.ready, int(rng.random() < 0.7))
            ctx.set(dut.block.ready, int(rng.random() < 0.5))
            ctx.set(dut.data_out.ready, int(rng.random() < 0.7))
            offer = bool(pending) and pending[0][0] <= cyc and rng.random() < 0.7
            if offer:
                ctx.set(dut.data_in.payload.data, pending[0][1])
                ctx.set(dut.data_in.payload.last, pending[0][2])
            ctx.set(dut.data_in.valid, int(offer))
            await ctx.delay(1e-9)
            if ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready):
                p = ctx.get(dut.cmd.payload)
                cmds.append((p.addr, p.length))
                n = p.length // beat
                for i in range(n):
                    if 0x8000 <= p.addr < 0x9000:     # a table read: the table's bytes
                        off = p.addr - table_base
                        data = int.from_bytes(image[off:off + beat], "little")
                    else:
                        data = (p.addr + i) % 2 ** data_width
                    pending.append((cyc + int(rng.integers(3, 12)), data, int(i == n - 1),
                                    0x8000 <= p.addr < 0x9000))
            if offer and ctx.get(dut.data_in.ready):
                pending.pop(0)
            if ctx.get(dut.data_out.valid) and ctx.get(dut.data_out.ready):
                out_beats.append(ctx.get(dut.data_out.payload.data))
            if ctx.get(dut.kind.valid) and ctx.get(dut.kind.ready):
                kinds.append(ctx.get(dut.kind.payload))
            if ctx.get(dut.block.valid) and ctx.get(dut.block.ready):
                p = ctx.get(dut.block.payload)
                blocks.append((p.rows_valid, p.n_keys, p.gdiag))
            await ctx.tick()
            if len(cmds) == len(expect) and not ctx.get(dut.busy) and not pending:
                break
        assert not ctx.get(dut.busy)
        state["page_error"] = ctx.get(dut.page_error)

    run_clocked(dut, tb)
    assert blocks == expect_blocks
    assert [a for a, _ in cmds] == [a for _, a in expect]
    assert [n for _, n in cmds] == [beat if k == TABLE else ROW_BYTES for k, _ in expect]
    rows = [(k, a) for k, a in expect if k != TABLE]
    assert kinds == [k for k, _ in rows]
    # every row's beats went on to the core, in order; no table beat did
    assert out_beats == [(a + i) % 2 ** data_width for _, a in rows
                         for i in range(ROW_BYTES // beat)]
    return state["page_error"]


@pytest.mark.parametrize("seq_len, heads, block_rows, kv_len, causal, group, grouped, banks, "
                         "page_rows, data_width", [
    # decode, grouped heads (one pass reads the group's K/V once), pages of 4 and 1 rows
    (1, 4, 4, 37, False, 4, True, 2, 4, 64), (1, 2, 4, 9, False, 1, False, 2, 1, 64),
    # a table beat of one entry (32-bit bus) and of four (128-bit); a last partial beat
    (1, 2, 4, 23, False, 2, True, 2, 4, 32), (1, 4, 4, 70, False, 4, True, 2, 2, 128),
    # causal blocks each walk their own pages; more banks (K 3 rows ahead of V, over a
    # page edge); a block of one key
    (7, 2, 4, 19, True, 2, False, 2, 4, 64), (5, 2, 4, 30, False, 1, False, 4, 2, 64),
    (1, 1, 4, 1, False, 1, False, 3, 4, 64)])
def test_the_paged_read_sequencer_walks_its_table_as_its_twin(
        rng, seq_len, heads, block_rows, kv_len, causal, group, grouped, banks, page_rows,
        data_width):
    assert not check_paged_sequencer(
        rng, seq_len=seq_len, heads=heads, block_rows=block_rows, kv_len=kv_len,
        causal=causal, group=group, grouped=grouped, banks=banks, page_rows=page_rows,
        data_width=data_width)


@pytest.mark.parametrize("bad", [0x7FFF_FFF8, 0x10_0004])
def test_a_page_past_the_limit_or_misaligned_is_read_at_zero_and_flagged(rng, bad):
    """The page's rows come from slot 0 (the twin says where), the walk goes on, and
    page_error is up at the end (the controller ends the run with PAGE_OUT_OF_RANGE)."""
    assert check_paged_sequencer(rng, seq_len=1, heads=2, block_rows=4, kv_len=20, group=2,
                                 grouped=True, page_rows=4, page_limit=0x4000_0000,
                                 bad_page=(2, bad))


def test_a_good_table_under_a_limit_raises_no_page_error(rng):
    assert not check_paged_sequencer(rng, seq_len=1, heads=2, block_rows=4, kv_len=20,
                                     group=2, grouped=True, page_rows=4,
                                     page_limit=0x4000_0000)


def test_plan_of_a_batch_counts_its_pages_tables_and_descriptors(tmp_path, capsys):
    """`attenio plan --kv-lens ... --page-rows 16`: the batch's bytes are its sequences'
    runs plus a descriptor each, against the same sequences contiguous and launched one by
    one, and the cycles of each by the model."""
    from attenio.cli import main
    from attenio.plan import BatchSequence, batch_traffic

    assert main(["plan", "--preset", "small", "--heads", "8", "--kv-heads", "2", "--kv-lens",
                 "17,300,96", "--page-rows", "16", "--json", "-o", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["kv_len"] for s in data["sequences"]] == [17, 300, 96]
    assert data["bytes_by_tensor"]["descriptors"] == 3 * 32
    config = paged(dataclasses.replace(preset("small"), workload=dataclasses.replace(
        preset("small").workload, seq_len=1, kv_len=300, heads=8, kv_heads=2)), 16)
    m = data["mapping"]
    config = dataclasses.replace(config, split=m["split"], rows_per_mac=m["rows_per_mac"],
                                 banks=m["banks"])
    seqs = [BatchSequence(1, n) for n in (17, 300, 96)]
    traffic = batch_traffic(make_plan(config), seqs, heads=8, group=4,
                            grouped=data["grouped"])
    assert data["batch"]["bytes_read"] == traffic.read_bytes
    assert data["batch"]["bytes_read"] - data["contiguous"]["bytes_read"] == (
        data["bytes_by_tensor"]["table"] + data["bytes_by_tensor"]["descriptors"])
    assert data["batch"]["cycles"] >= data["contiguous"]["cycles"]


def test_a_batch_from_a_toml_table_and_its_refusals(tmp_path, capsys):
    from attenio.cli import main

    toml = tmp_path / "b.toml"
    toml.write_text('preset = "small"\n[budget]\npage_rows = 16\n'
                    '[batch]\nkv_lens = [40, 90]\nseq_lens = [1, 16]\ncausal = [false, true]\n')
    assert main(["compare", "--config", str(toml), "--json", "-o", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sequences"][1] == {"seq_len": 16, "kv_len": 90, "causal": True}
    assert main(["plan", "--preset", "small", "--kv-lens", "17,30"]) == 2
    assert "add --page-rows" in capsys.readouterr().err
    toml.write_text('preset = "small"\n[budget]\npage_rows = 16\n[batch]\nkv_lens = [4]\n'
                    'seq_lens = [1, 2]\n')
    assert main(["plan", "--config", str(toml)]) == 2
    assert "seq_lens must be one value or one per sequence (1), not 2" in capsys.readouterr().err


class _PythonBoard:
    """The host's side of a board whose accelerator is Python: memory, the registers, and
    at START the batch as the descriptors and tables in memory describe it, each sequence
    through the golden model (so what the host wrote is what the hardware would read)."""

    def __init__(self, plan):
        import numpy as np

        self.np, self.plan = np, plan
        self.mem = bytearray(1 << 20)
        self.regs = {}

    def read(self, addr, n):
        return bytes(self.mem[addr:addr + n])

    def start(self):
        from attenio.regmap import unpack_descriptor
        from attenio.sim.run_data import RunData

        np, r, plan = self.np, self.regs, self.plan
        d, fmt = plan.workload.head_dim, plan.config.format
        el = np.dtype("i1") if fmt.element_bytes == 1 else np.dtype("<u2")
        heads, group = r["HEADS"], r["HEAD_GROUP"]
        for i in range(r["DESC_COUNT"]):
            desc = unpack_descriptor(self.read(r["DESC_BASE"] + 32 * i, 32))
            n, n_kv = desc["seq_len"], desc["kv_len"]
            table = [int(x) for x in np.frombuffer(
                self.read(desc["table"], 4 * desc["table_len"]), "<u4")]
            row = lambda a: np.frombuffer(self.read(int(a), d * el.itemsize), el)
            q = np.array([[row(desc["q_base"] + h * r["Q_HEAD_STRIDE"] + t * r["Q_ROW_STRIDE"])
                           for t in range(n)] for h in range(heads)])
            kv = {t: np.array([[row(paged_row_addr(table, j, page_rows=plan.budget.page_rows,
                                                   base=r[f"{t}_BASE"], head=g,
                                                   head_stride=r[f"{t}_HEAD_STRIDE"],
                                                   row_stride=r[f"{t}_ROW_STRIDE"]))
                                for j in range(n_kv)] for g in range(heads // group)])
                  for t in "KV"}
            data = RunData(fmt, q, kv["K"], kv["V"], r["SCALE_C"], {})
            o = data.golden(plan, causal=bool(desc["flags"] & 1))
            for h in range(heads):
                for t in range(n):
                    at = desc["o_base"] + h * r["O_HEAD_STRIDE"] + t * r["O_ROW_STRIDE"]
                    raw = o[h, t].tobytes()
                    self.mem[at:at + len(raw)] = raw


def test_the_host_programs_a_batch_that_a_python_board_runs_from_memory(rng):
    """`AttenIOHost.run_batch` writes the tests' memory image (descriptors, shuffled pages,
    block tables) and registers; a board that reads only memory and registers computes
    every sequence's golden O from them: the image says what the host meant."""
    import asyncio

    from attenio.plan import BatchSequence
    from attenio.sim.host import AttenIOHost
    from attenio.sim.run_data import RunData

    config = paged(dataclasses.replace(preset("small"), workload=dataclasses.replace(
        preset("small").workload, seq_len=96, heads=8, kv_heads=2)), 16)
    plan = make_plan(config)
    seqs = [BatchSequence(1, 37), BatchSequence(4, 20, causal=True), BatchSequence(1, 3)]
    datas = [RunData.make(config.format, head_dim=16, seq_len=s.seq_len, kv_len=s.kv_len,
                          heads=8, group=4, seed=int(rng.integers(1 << 30))) for s in seqs]
    datas = [dataclasses.replace(x, c=datas[0].c) for x in datas]
    board = _PythonBoard(plan)
    host = AttenIOHost(None, register_map(plan))

    async def csr_write(name, value):
        board.regs[name] = value
        if name == "CTRL":
            board.start()

    async def csr_read(name):
        return 2 if name == "STATUS" else 0

    async def mem_write(addr, data):
        board.mem[addr:addr + len(data)] = data

    async def mem_read(addr, n):
        return board.read(addr, n)

    async def read64(name):
        return 0

    host.csr_write, host.csr_read, host.mem_write = csr_write, csr_read, mem_write
    host.mem_read, host.read64 = mem_read, read64
    outs, _ = asyncio.run(host.run_batch(plan, seqs, datas, heads=8, group=4,
                                         seed=int(rng.integers(1 << 30))))
    for s, data, o in zip(seqs, datas, outs):
        assert o.shape == (8, s.seq_len, 16)
        assert (o == data.golden(plan, causal=s.causal)).all()


def test_sim_of_a_batch_needs_paged_hardware(capsys):
    from attenio.cli import main

    assert main(["sim", "--preset", "small", "--kv-lens", "17,30", "-o", "build/paging/x"]) == 2
    assert "add --page-rows" in capsys.readouterr().err
