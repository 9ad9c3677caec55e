"""Properties shared by the proofs: the stream handshake rules, past values, a cycle count;
and `Skipping`, the broken copy that the stream-rule proofs must reject.

A stream's rules (those of `amaranth.lib.stream`, and AXI's for each channel): once
`valid` is up it stays up, and the payload stays put, until `ready` takes it. A
component is proved to keep them on its outputs while its inputs are assumed to.
"""

from amaranth.hdl import Assert, Assume, Module, ResetSignal, Signal, Value
from amaranth.lib import wiring

__all__ = ["past", "held_until_ready", "keeps_stream_rules", "obeys_stream_rules", "Skipping"]


def past(m, value, *, name=None, reset_less=False):
    """`value` (its bits, for a struct) one cycle ago (0 in the first cycle, and after a
    reset unless `reset_less`)."""
    value = Value.cast(value)
    reg = Signal(value.shape(), name=name or "past", reset_less=reset_less)
    m.d.sync += reg.eq(value)
    return reg


def held_until_ready(m, valid, ready, payload, *, name):
    """Whether the handshake must hold now: valid and not taken in the last cycle (not
    in reset), with the payload it had then."""
    stalled = past(m, valid & ~ready & ~ResetSignal(), name=f"{name}_stalled")
    before = past(m, payload, name=f"{name}_before")
    return stalled, before


def keeps_stream_rules(m, port, *, name, valid=None, ready=None, payload=None,
                       empty_after_reset=True):
    """Assert that the producer of `port` (a stream interface, or valid/ready/payload
    given apart) keeps valid up and the payload put until ready (unless a reset
    intervenes), and, if `empty_after_reset`, offers nothing in the cycle after a reset
    (a component without state passes on what its producers offer then)."""
    valid = port.valid if valid is None else valid
    ready = port.ready if ready is None else ready
    payload = Value.cast(port.payload if payload is None else payload)
    stalled, before = held_until_ready(m, valid, ready, payload, name=name)
    # a reset ends the handshake: the producer's inputs may change in its cycle
    with m.If(stalled & ~ResetSignal()):
        m.d.comb += Assert(valid, f"{name}: valid dropped before ready")
        m.d.comb += Assert(payload == before, f"{name}: payload changed before ready")
    if empty_after_reset:
        was_reset = past(m, ResetSignal(), name=f"{name}_was_reset", reset_less=True)
        with m.If(was_reset):
            m.d.comb += Assert(~valid, f"{name}: valid in the cycle after reset")


def obeys_stream_rules(m, port, *, name, valid=None, ready=None, payload=None):
    """Assume that the producer driving `port` keeps the same rules."""
    valid = port.valid if valid is None else valid
    ready = port.ready if ready is None else ready
    payload = Value.cast(port.payload if payload is None else payload)
    stalled, before = held_until_ready(m, valid, ready, payload, name=name)
    with m.If(stalled & ~ResetSignal()):
        m.d.comb += Assume(valid & (payload == before))


class Skipping(wiring.Component):
    """A broken copy of `inner` (a `wiring.Component`), port for port, but for the `ready`
    of its output stream `port` (a name): `inner` is told that every offer on it is taken,
    so behind a stalled consumer it moves on, and the offer changes or vanishes."""

    def __init__(self, inner, port):
        self._inner, self._port = inner, port
        super().__init__(dict(inner.signature.members))

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self._inner
        for path, member, ours in self.signature.flatten(self):
            theirs = inner
            for step in path:
                theirs = getattr(theirs, step) if isinstance(step, str) else theirs[step]
            if path == (self._port, "ready"):
                m.d.comb += theirs.eq(1)
            elif member.flow == wiring.Out:
                m.d.comb += ours.eq(theirs)
            else:
                m.d.comb += theirs.eq(ours)
        return m
