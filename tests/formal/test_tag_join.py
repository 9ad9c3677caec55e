"""Proof of `TagJoin` by k-induction: every element taken leaves once, with the tag at
the head; a tag leaves with its command's last element and with no other; the joined
stream keeps the stream rules while both inputs do."""

from amaranth.hdl import Assert, Cover, Elaboratable, Module, unsigned
from amaranth.lib import data

from attenio.hdl.tag_join import TagJoin

from .sby import formal, inputs_of, prove
from .streams import keeps_stream_rules, obeys_stream_rules

pytestmark = formal

ELEMENT = data.StructLayout({"value": unsigned(4), "last": unsigned(1)})
DEPTH = 2


class TagPerElement(TagJoin):
    """A broken join: it pops the tag with every element, not with the last."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.tags.ready.eq(self.o.valid & self.o.ready)
        return m


class TagJoinSpec(Elaboratable):
    def __init__(self, dut):
        self.dut = dut

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        tags, elements, o = dut.tags, dut.elements, dut.o
        obeys_stream_rules(m, tags, name="tags")
        obeys_stream_rules(m, elements, name="elements")
        keeps_stream_rules(m, o, name="o", empty_after_reset=False)   # no state to empty
        gave = o.valid & o.ready
        m.d.comb += [
            Assert((elements.valid & elements.ready) == gave, "an element leaves as it is taken"),
            Assert((tags.valid & tags.ready) == (gave & elements.payload.last),
                   "a tag leaves with its command's last element only"),
        ]
        with m.If(o.valid):
            m.d.comb += [Assert(o.payload.kind == tags.payload, "the element has the head tag"),
                         Assert(o.payload.value == elements.payload.value, "and its own value")]
        m.d.comb += Cover(gave & ~elements.payload.last)
        return m


def check(dut, name, mode):
    return prove(TagJoinSpec(dut), name, inputs=inputs_of(dut), mode=mode, depth=DEPTH)


def test_the_tag_join_gives_each_element_its_commands_tag_in_every_reachable_state():
    result = check(TagJoin(tag_shape=2, element_layout=ELEMENT), "tag_join", "prove")
    assert result.passed, result.explain()
    result = check(TagJoin(tag_shape=2, element_layout=ELEMENT), "tag_join_cover", "cover")
    assert result.passed, result.explain()


def test_a_join_that_pops_a_tag_per_element_fails_the_proof():
    result = check(TagPerElement(tag_shape=2, element_layout=ELEMENT), "tag_join_per_element",
                   "prove")
    assert result.status == "FAIL" and result.failed, result.explain()
