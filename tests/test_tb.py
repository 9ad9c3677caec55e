"""The testbench library (attenio.sim.tb): the parts that need no simulator.

The memory, the monitor and the stream drivers run inside every cocotb bench;
here are the pieces a bench trusts blindly: the counter list taken from the
register map, the seeded generators and the struct payload packing.
"""

import random

import numpy as np
import pytest

from attenio.config import resolve
from attenio.hdl.core import Kind, feed_layout
from attenio.hdl.dma import command_layout, error_layout
from attenio.hdl.widthconv import element_layout
from attenio.plan import make_plan
from attenio.regmap import Access, register_map
from attenio.sim.tb.counters import counter_names, counter_registers
from attenio.sim.tb.rng import seeded
from attenio.sim.tb.streams import pack, unpack


def test_counters_are_the_maps_64_bit_read_only_registers():
    rmap = register_map(make_plan(resolve()))
    regs = counter_registers(rmap)
    assert [r.name for r in regs] == list(counter_names(rmap)) == list(counter_names())
    assert regs and all(r.width == 64 and r.access is Access.RO for r in regs)
    # hardware order: consecutive 64-bit slots
    assert [r.offset for r in regs] == [regs[0].offset + 8 * i for i in range(len(regs))]
    assert {"CYCLES", "BYTES_READ", "BYTES_WRITTEN"} <= set(counter_names())


def test_counters_do_not_depend_on_the_plan():
    big = make_plan(resolve(workload={"seq_len": 512, "head_dim": 64, "heads": 4}))
    assert counter_names(register_map(big)) == counter_names()


def test_seeded_generators_replay(capsys):
    a, b = seeded("bench_x", "t", 7, 64), seeded("bench_x", "t", 7, 64)
    assert a.key == "7:t:64" and "'7:t:64'" in capsys.readouterr().out
    assert [a.random() for _ in range(5)] == [b.random() for _ in range(5)]
    assert seeded("bench_x", "u", 7, 64).random() != seeded("bench_x", "t", 7, 64).random()
    # the NumPy twin is fixed by the key alone, whatever the generator drew before
    c = seeded("bench_x", "t", 7, 64)
    c.random()
    assert np.array_equal(a.numpy().integers(0, 1 << 30, 8), c.numpy().integers(0, 1 << 30, 8))
    assert np.array_equal(c.numpy().integers(0, 1 << 30, 8), np.random.default_rng(
        random.Random("7:t:64").getrandbits(64)).integers(0, 1 << 30, 8))


@pytest.mark.parametrize("kind, value", [(Kind.Q, -128), (Kind.K, 127), (Kind.V, -1)])
def test_pack_follows_the_hardware_layout(kind, value):
    layout = feed_layout()
    word = pack(layout, kind=kind, value=[np.int64(value)])
    assert word == layout.const({"kind": kind, "value": [value]}).as_bits()
    kind_field, value_field = layout["kind"], layout["value"]
    assert word >> kind_field.offset & ((1 << kind_field.width) - 1) == kind.value
    assert word >> value_field.offset & 0xFF == value & 0xFF
    assert unpack(layout, word).value[0] == value and unpack(layout, word).kind == kind


def test_pack_puts_a_chunk_little_endian():
    layout = feed_layout(4)
    word = pack(layout, kind=Kind.K, value=[1, -1, 127, -128])
    assert word == layout.const({"kind": Kind.K, "value": [1, -1, 127, -128]}).as_bits()
    assert word >> layout["value"].offset & 0xFFFFFFFF == 0x807FFF01
    assert [int(v) for v in unpack(layout, word).value] == [1, -1, 127, -128]
    with pytest.raises(ValueError, match="value needs 4 elements, not 3"):
        pack(layout, kind=Kind.K, value=[1, 2, 3])
    with pytest.raises(ValueError, match=r"value\[2\] = 128 does not fit"):
        pack(layout, kind=Kind.K, value=[1, 2, 128, 4])


def test_unpack_signed_and_flags():
    o = unpack(element_layout(), 0x1FD)
    assert (o.value[0], o.last) == (-3, 1)
    e = unpack(error_layout(), 0b100)
    assert (e.read, e.write, e.command) == (0, 0, 1)
    assert unpack(command_layout(32), pack(command_layout(32), addr=0x1000, length=64)).length == 64


def test_pack_refuses_a_value_the_field_cannot_hold():
    with pytest.raises(ValueError, match=r"value\[0\] = 200"):
        pack(feed_layout(), kind=Kind.Q, value=[200])
    with pytest.raises(ValueError, match="length = 4096"):
        pack(command_layout(12), addr=0, length=4096)
    assert pack(feed_layout(), kind=Kind.V.value, value=[-3]) == pack(feed_layout(), kind=Kind.V,
                                                                       value=[-3])
