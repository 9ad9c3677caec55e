"""Valid/ready streams as Amaranth emits them: `<name>__valid`, `<name>__ready`, `<name>__payload`.

`StreamSource` offers payloads with random idle cycles, `StreamSink` takes them with
a random ready; both sample the handshake right after the rising edge. Payloads
are integers; `pack` and `unpack` convert a `data.StructLayout` payload from the
hardware's own layout, so no field offset is typed in a bench.
"""

import enum

import cocotb
from amaranth.hdl import Shape
from amaranth.lib import data
from cocotb.triggers import RisingEdge

__all__ = ["StreamSource", "StreamSink", "pack", "unpack"]


def _port(dut, name):
    return (getattr(dut, f"{name}__{s}") for s in ("valid", "ready", "payload"))


def _bits(name, shape, value):
    """The raw bits of `value` in `shape`; an `ArrayLayout` takes a sequence, element 0 lowest."""
    if isinstance(shape, data.ArrayLayout):
        values = list(value)
        if len(values) != shape.length:
            raise ValueError(f"{name} needs {shape.length} elements, not {len(values)}")
        width = Shape.cast(shape.elem_shape).width
        return sum(_bits(f"{name}[{i}]", shape.elem_shape, v) << (i * width)
                   for i, v in enumerate(values))
    shape = Shape.cast(shape)
    raw = value.value if isinstance(value, enum.Enum) else int(value)
    lo = -(1 << (shape.width - 1)) if shape.signed else 0
    if not lo <= raw < lo + (1 << shape.width):
        raise ValueError(f"{name} = {value!r} does not fit the field's shape {shape!r}")
    return raw & ((1 << shape.width) - 1)


def pack(layout, **fields):
    """The bits of a struct payload with the given field values (fields left out are 0;
    an array field takes a sequence); a value its field cannot hold raises ValueError."""
    word = 0
    for name, value in fields.items():
        field = layout[name]
        word |= _bits(name, field.shape, value) << field.offset
    return word


def unpack(layout, bits):
    """A struct payload's fields (attribute access: `unpack(layout, word).data`)."""
    return layout.from_bits(bits)


class StreamSource:
    """Drives the stream `name` of `dut`; each cycle before a transfer idles with
    probability `gap` (drawn from `rng`)."""

    def __init__(self, dut, name, *, rng=None, gap=0.0):
        if gap and rng is None:
            raise ValueError(f"stream {name!r}: a gap of {gap} needs an rng")
        self.clk = dut.clk
        self.valid, self.ready, self.payload = _port(dut, name)
        self.rng, self.gap = rng, gap
        self.valid.value = 0

    async def send(self, payloads):
        """Offer each payload until it is taken; valid is low afterwards."""
        for item in payloads:
            while self.gap and self.rng.random() < self.gap:
                self.valid.value = 0
                await RisingEdge(self.clk)
            self.payload.value = item
            self.valid.value = 1
            while True:
                await RisingEdge(self.clk)
                if self.ready.value:
                    break
        self.valid.value = 0


class StreamSink:
    """Takes transfers from the stream `name` of `dut` into `items`; ready is high in
    a cycle with probability `ready` (drawn from `rng`)."""

    def __init__(self, dut, name, *, rng=None, ready=1.0):
        if ready < 1 and rng is None:
            raise ValueError(f"stream {name!r}: a ready probability of {ready} needs an rng")
        self.clk = dut.clk
        self.valid, self.ready_signal, self.payload = _port(dut, name)
        self.rng, self.ready = rng, ready
        self.items = []
        self.ready_signal.value = 0

    async def _cycle(self):
        go = self.ready >= 1 or self.rng.random() < self.ready
        self.ready_signal.value = int(go)
        await RisingEdge(self.clk)
        if go and self.valid.value:
            self.items.append(int(self.payload.value))

    async def take(self, count):
        """Collect until `items` holds `count` transfers; ready is low afterwards."""
        while len(self.items) < count:
            await self._cycle()
        self.ready_signal.value = 0
        return self.items

    def start(self):
        """Collect for ever, in the background; returns the task."""
        async def forever():
            while True:
                await self._cycle()
        return cocotb.start_soon(forever())
