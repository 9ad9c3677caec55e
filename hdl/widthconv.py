"""Width converters between AXI beats and streams of element chunks.

The DMA moves `data_width`-bit beats; the core consumes and produces one chunk
of `width` elements (int8, or fp16/bf16 encodings) per cycle (`width` = s, the MACs a Q row is split
over: the s MACs of a row each take one element of a chunk). Elements sit
little-endian in a beat and in a chunk (element 0 in the low bits), which is
the byte order of memory, so a row of Q, K or V in memory is the element order
of the stream.
"""

from amaranth.hdl import Module, Shape, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio import validate

__all__ = ["element_layout", "BeatUnpacker", "BeatPacker"]


def element_layout(width=1, element=signed(8)):
    """A chunk of `width` consecutive elements of shape `element` (`value[0]` first);
    `last` ends the command (a row or a block) it belongs to."""
    validate.positive("element_layout", width=width)
    return data.StructLayout({"value": data.ArrayLayout(element, width), "last": unsigned(1)})


class _Converter(wiring.Component):
    """A converter between `data_width`-bit beats and chunks of `width` elements of shape
    `element` (8 or 16 bits), `i` in and `o` out.

    A subclass names the two payloads (`_payloads`); both keep one beat in a register
    with the index of its current chunk and whether it holds data (`_beat_state`).
    """

    def __new__(cls, *, data_width, width=1, element=signed(8)):
        # Checked before the object exists: a refused converter is no unused elaboratable.
        validate.one_of(cls.__name__, "data_width", data_width, validate.AXI_DATA_WIDTHS)
        validate.positive(cls.__name__, width=width)
        bits = Shape.cast(element).width
        validate.one_of(cls.__name__, "element width", bits, (8, 16))
        if data_width % (bits * width):
            raise ValueError(f"{cls.__name__}: a {data_width}-bit beat must hold whole chunks of "
                             f"{width} {bits}-bit elements")
        return super().__new__(cls)

    def __init__(self, *, data_width, width=1, element=signed(8)):
        self._data_width, self._width, self._element = data_width, width, element
        self._chunk_bits = width * Shape.cast(element).width
        i, o = self._payloads(data_width, width, element)
        super().__init__({"i": In(stream.Signature(i)), "o": Out(stream.Signature(o))})

    @property
    def data_width(self):
        return self._data_width

    @property
    def width(self):
        """Elements per chunk."""
        return self._width

    def _beat_state(self):
        """(chunks per beat, the beat, the chunk index, the beat holds data)."""
        n = self._data_width // self._chunk_bits
        return n, Signal(self._data_width, name="beat"), Signal(range(n), name="index"), \
            Signal(name="full")


class BeatUnpacker(_Converter):
    """Beats {data, last} in, chunks {value, last} out, one per cycle.

    `last` of a beat is carried to the beat's final chunk.
    """

    #: cycles from a beat accepted to its first chunk offered (the beat register)
    latency = 1

    @staticmethod
    def _payloads(data_width, width, element):
        return (data.StructLayout({"data": unsigned(data_width), "last": unsigned(1)}),
                element_layout(width, element))

    def elaborate(self, platform):
        m = Module()
        n, beat, index, full = self._beat_state()
        last = Signal()
        m.d.comb += [
            self.o.valid.eq(full),
            self.o.payload.value.eq(beat.word_select(index, self._chunk_bits)),
            self.o.payload.last.eq(last & (index == n - 1)),
            self.i.ready.eq(~full | (self.o.ready & (index == n - 1))),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += index.eq(index + 1)
            with m.If(index == n - 1):
                m.d.sync += [index.eq(0), full.eq(0)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [beat.eq(self.i.payload.data), last.eq(self.i.payload.last), full.eq(1),
                         index.eq(0)]
        return m


class BeatPacker(_Converter):
    """Chunks {value, last} in, beats {data} out; a beat leaves when its last chunk arrives.

    The byte count of every write is a multiple of the beat (the controller
    guarantees it), so no partial beat ever needs flushing and `last` (the end of
    the producer's block) is not needed to close one.
    """

    #: cycles from a beat's last chunk accepted to the beat offered (a register)
    latency = 1

    @staticmethod
    def _payloads(data_width, width, element):
        return element_layout(width, element), data.StructLayout({"data": unsigned(data_width)})

    def elaborate(self, platform):
        m = Module()
        n, beat, index, full = self._beat_state()
        m.d.comb += [
            self.o.valid.eq(full),
            self.o.payload.data.eq(beat),
            self.i.ready.eq(~full | self.o.ready),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += full.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [beat.word_select(index, self._chunk_bits).eq(self.i.payload.value),
                         index.eq(index + 1)]
            with m.If(index == n - 1):
                m.d.sync += [index.eq(0), full.eq(1)]
        return m
