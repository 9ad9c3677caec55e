"""`TagJoin`: elements of whole commands, each joined with its command's tag.

The read sequencer tags every read command with its kind (Q, K or V) in a FIFO
beside the DMA; the data come back in command order, so the tag at the head of
that FIFO belongs to every element up to the one marked `last`, and is popped
with it. The core's feed then carries kind and value together.
"""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["TagJoin"]


class TagJoin(wiring.Component):
    """`tags` (one per command, of `tag_shape`) and `elements` ({value, last}: `last` ends
    a command) in, `o` ({kind: tag, value}) out. No register: a pure join of two streams
    (valid of `o` when both have one; the tag is taken with its command's last element)."""

    def __init__(self, *, tag_shape, element_layout):
        if "value" not in element_layout.members or "last" not in element_layout.members:
            raise TypeError(f"TagJoin: element_layout needs 'value' and 'last' fields, not "
                            f"{element_layout!r}")
        self._out = data.StructLayout({"kind": tag_shape,
                                       "value": element_layout.members["value"]})
        super().__init__({
            "tags": In(stream.Signature(tag_shape)),
            "elements": In(stream.Signature(element_layout)),
            "o": Out(stream.Signature(self._out)),
        })

    def elaborate(self, platform):
        m = Module()
        tags, elements, o = self.tags, self.elements, self.o
        take = o.valid & o.ready
        m.d.comb += [
            o.valid.eq(elements.valid & tags.valid),
            o.payload.kind.eq(tags.payload),
            o.payload.value.eq(elements.payload.value),
            elements.ready.eq(o.ready & tags.valid),
            tags.ready.eq(take & elements.payload.last),
        ]
        return m
