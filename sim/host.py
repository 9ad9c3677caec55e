"""The host side of the board's UART link: load Q, K, V, run, read O and the counters.

The protocol is the one `attenio.hdl.board.UARTBridge` serves (its docstring
lists the commands). `AttenIOHost` speaks it over any *link* with two
coroutines, ``send(bytes)`` and ``recv(n) -> bytes``: `SerialLink` wraps a
serial port (pyserial) for the real board, and the cocotb bench
(`sim/benches/bench_board.py`) gives a simulated UART peer, so one host script
serves both and is tested without hardware.

On the board:

    python -m attenio.sim.host --port /dev/ttyUSB0 --preset small --format fp16 --seed 3

(the options the bitstream was built with, `BOARD_OPTS` of the Makefile but
the clock; the script plans them as the build did and checks every read-only
hardware parameter it reads back against that plan, the FORMAT register among them).
The inputs and the expected O are those of `attenio sim` in the Plan's format
(`attenio.sim.run_data.RunData`).
"""

import asyncio
import struct

import numpy as np

from attenio.hdl.board import CMD, STATUS
from attenio.regmap import Access, DescFlag, ErrorCode

from .run_data import RunData
from .tb.counters import counter_names

__all__ = ["HostError", "AttenIOHost", "SerialLink", "Layout", "main"]

_CHUNK = 0xFFFF


class HostError(RuntimeError):
    """The board answered something the protocol does not allow."""


class Layout:
    """Q, K, V, O packed one after the other, [head][row][d] each, from address 0 (the
    board's block RAM holds no more, `attenio.hdl.board.board_memory_bytes`). Q, K and V
    elements are `element_bytes` wide, O's `out_bytes` (None: the same; fp8 writes O in
    bf16); `row_stride`, `head_stride`, `tensor_bytes` and `base` are by tensor name."""

    def __init__(self, *, heads, seq_len, head_dim, element_bytes=1, out_bytes=None):
        out_bytes = element_bytes if out_bytes is None else out_bytes
        self.row_stride = {t: head_dim * (out_bytes if t == "O" else element_bytes)
                           for t in "QKVO"}
        self.head_stride = {t: seq_len * rs for t, rs in self.row_stride.items()}
        self.tensor_bytes = {t: heads * hs for t, hs in self.head_stride.items()}
        self.base, addr = {}, 0
        for t in "QKVO":
            self.base[t], addr = addr, addr + self.tensor_bytes[t]
        self.total = addr


class AttenIOHost:
    """Commands of the UART protocol and a whole attention run, over `link`."""

    def __init__(self, link, regmap):
        self.link = link
        self.regmap = regmap

    async def _status(self, what):
        (status,) = await self.link.recv(1)
        if status == STATUS["ok"]:
            return
        kind = {STATUS["error"]: "an AXI error", STATUS["unknown"]: "unknown command"}.get(
            status, f"status byte {status:#04x}")
        raise HostError(f"{what}: the board answered {kind}")

    async def ping(self):
        await self.link.send(bytes([CMD["ping"]]))
        await self._status("ping")

    def _offset(self, reg):
        return self.regmap.offset(reg) if isinstance(reg, str) else int(reg)

    async def csr_write(self, reg, value):
        off = self._offset(reg)
        await self.link.send(struct.pack("<BHI", CMD["csr_write"], off, value & 0xFFFF_FFFF))
        await self._status(f"CSR write of {reg}")

    async def csr_read(self, reg):
        off = self._offset(reg)
        await self.link.send(struct.pack("<BH", CMD["csr_read"], off))
        data = await self.link.recv(4)
        await self._status(f"CSR read of {reg}")
        return struct.unpack("<I", data)[0]

    async def read64(self, reg):
        """A 64-bit register: the low word first (which latches the high word)."""
        off = self._offset(reg)
        lo = await self.csr_read(off)
        hi = await self.csr_read(off + 4)
        return hi << 32 | lo

    async def mem_write(self, addr, data):
        data = bytes(data)
        for start in range(0, len(data), _CHUNK):
            chunk = data[start:start + _CHUNK]
            await self.link.send(struct.pack("<BIH", CMD["mem_write"], addr + start, len(chunk))
                                 + chunk)
            await self._status(f"memory write at {addr + start:#x}")

    async def mem_read(self, addr, n):
        out = bytearray()
        for start in range(0, n, _CHUNK):
            count = min(_CHUNK, n - start)
            await self.link.send(struct.pack("<BIH", CMD["mem_read"], addr + start, count))
            out += await self.link.recv(count)
        return bytes(out)

    async def hardware(self):
        """The read-only hardware parameters (MAX_SEQ_LEN, HEAD_DIM, ...)."""
        return {r.name: await self.csr_read(r.name) for r in self.regmap
                if r.access is Access.CONST}

    async def check_hardware(self):
        """Raise HostError unless the board's read-only parameters are those of `regmap`."""
        hw = await self.hardware()
        bad = [f"{r.name} {hw[r.name]} (expected {r.value})" for r in self.regmap
               if r.access is Access.CONST and hw[r.name] != r.value]
        if bad:
            raise HostError("the board was built for another configuration: " + ", ".join(bad))
        return hw

    async def run(self, data, *, poll_limit=100000):
        """Load the Q, K, V of `data` (a `RunData`: the elements as its format stores them,
        its SCALE_C, or each head's c in SCALE_C_TABLE), run, and return (o, counters), o
        [heads, N, d] as memory holds it (`RunData.out_dtype`), to compare with
        `data.golden`."""
        if data.k.shape != data.q.shape:
            raise ValueError(f"the board's runs have K and V of Q's shape {list(data.q.shape)}, "
                             f"not {list(data.k.shape)} (no N_kv or head group)")
        heads, n, d = data.q.shape
        lay = Layout(heads=heads, seq_len=n, head_dim=d, element_bytes=data.dtype.itemsize,
                     out_bytes=data.out_dtype.itemsize)
        for name in "QKV":
            x = getattr(data, name.lower())
            await self.mem_write(lay.base[name], np.ascontiguousarray(x, data.dtype).tobytes())
        regs = {"SEQ_LEN": n, "HEADS": heads, **data.registers(),
                "MODE": int(data.head_scales) * DescFlag.HEAD_SCALES}
        for t in "QKVO":
            regs.update({f"{t}_BASE": lay.base[t], f"{t}_HEAD_STRIDE": lay.head_stride[t],
                         f"{t}_ROW_STRIDE": lay.row_stride[t]})
        for name, value in regs.items():
            await self.csr_write(name, value)
        await self.csr_write("CTRL", 1)
        for _ in range(poll_limit):
            status = await self.csr_read("STATUS")
            if status & 2:
                break
        else:
            raise HostError(f"the run did not finish within {poll_limit} polls")
        error = await self.csr_read("ERROR")
        if error:
            raise HostError(f"the run ended with error {ErrorCode(error).name}")
        raw = await self.mem_read(lay.base["O"], lay.tensor_bytes["O"])
        o = np.frombuffer(raw, dtype=data.out_dtype).reshape(heads, n, d)
        counters = {name: await self.read64(name) for name in counter_names(self.regmap)}
        return o, counters


    async def run_batch(self, plan, seqs, datas, *, heads, group, grouped=True, seed=0,
                        poll_limit=100000):
        """A ragged batch in one launch on paged hardware (`plan.budget.page_rows`): the same
        memory image the tests use (`attenio.sim.batch.batch_image`: Q of each sequence, its
        pages in a seeded random order, its block table, the descriptors), the shared
        registers and DESC_BASE / DESC_COUNT, START once, DONE once. `datas`: each
        sequence's `RunData` (the first one's SCALE_C and SCALE_C_TABLE serve the batch).
        Returns ([o of each sequence, as memory holds it], counters)."""
        from .batch import batch_image

        segments, regs, places, _, _, _ = batch_image(
            plan, seqs, datas, heads=heads, group=group, grouped=grouped,
            rng=np.random.default_rng(seed))
        for addr, data in segments:
            await self.mem_write(addr, data)
        for name, value in regs.items():
            await self.csr_write(name, value)
        await self.csr_write("CTRL", 1)
        for _ in range(poll_limit):
            if await self.csr_read("STATUS") & 2:
                break
        else:
            raise HostError(f"the batch did not finish within {poll_limit} polls")
        error = await self.csr_read("ERROR")
        if error:
            index = await self.csr_read("DESC_INDEX")
            raise HostError(f"the batch ended with error {ErrorCode(error).name} at "
                            f"descriptor {index}")
        d, dtype = plan.workload.head_dim, datas[0].out_dtype
        o_hs = regs["O_HEAD_STRIDE"]
        outs = []
        for s, (_, o_base) in zip(seqs, places):
            raw = await self.mem_read(o_base, heads * o_hs)
            rows = np.frombuffer(raw, dtype=dtype).reshape(heads, o_hs // (d * dtype.itemsize), d)
            outs.append(rows[:, :s.seq_len].copy())
        counters = {name: await self.read64(name) for name in counter_names(self.regmap)}
        return outs, counters


class SerialLink:
    """A serial port (pyserial) as a link; blocking I/O inside coroutines is fine here."""

    def __init__(self, port, baud=115200, timeout=5.0):
        try:
            import serial
        except ImportError:
            raise SystemExit("the board link needs pyserial: pip install pyserial") from None
        self.port = serial.Serial(port, baud, timeout=timeout)

    async def send(self, data):
        self.port.write(data)

    async def recv(self, n):
        data = self.port.read(n)
        if len(data) != n:
            raise HostError(f"timed out waiting for {n} bytes from the board (got {len(data)})")
        return data


def main(argv=None):
    """Run one attention on the board and check it against the golden model of its format."""
    from attenio.options import Parser, add_shared_options, config_from_args, planned_config
    from attenio.errors import ConfigError
    from attenio.plan import make_plan
    from attenio.regmap import register_map

    p = Parser(prog="python -m attenio.sim.host", description=main.__doc__)
    p.add_argument("--port", required=True, help="serial port of the board, e.g. /dev/ttyUSB0")
    p.add_argument("--baud", type=int, default=115200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--head-scales", action="store_true",
                   help="a scale a tensor and head, each head's c in SCALE_C_TABLE "
                        "(MODE.HEAD_SCALES); default: a scale a tensor, SCALE_C")
    add_shared_options(p)
    args = p.parse_args(argv)
    try:
        # Planned as `python -m attenio.gen.board` plans it, so the mapping is the board's.
        plan = make_plan(planned_config(config_from_args(args)))
    except ConfigError as exc:
        p.exit(2, f"{p.prog}: error: {exc}\n")
    w = plan.workload
    host = AttenIOHost(SerialLink(args.port, args.baud), register_map(plan))
    data = RunData.make(plan.config.format, head_dim=w.head_dim, seq_len=w.seq_len,
                        heads=w.heads, seed=args.seed, head_scales=args.head_scales)

    async def go():
        await host.ping()
        await host.check_hardware()
        return await host.run(data)

    try:
        o, counters = asyncio.run(go())
    except HostError as exc:
        p.exit(2, f"{p.prog}: error: {exc}\n")
    expect = data.golden(plan)
    bad = int(np.count_nonzero(o != expect))
    print(f"seed {args.seed}, {plan.config.format.name}: output "
          f"{'bit-exact' if bad == 0 else f'{bad} elements differ'}")
    for name, value in counters.items():
        print(f"  {name:14s} {value}")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
