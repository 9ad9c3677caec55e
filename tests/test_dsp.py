"""hdl/formats/dsp: how a multiply operand is cut into MULT18X18D-sized pieces."""

import pytest
from amaranth.hdl import Signal, signed, unsigned

from attenio.hdl.formats.dsp import DSP_SIGNED_BITS, DSP_UNSIGNED_BITS, pieces

SHAPES = [unsigned(w) for w in (1, 8, 17, 18, 25, 34, 35, 52)] + \
         [signed(w) for w in (2, 18, 19, 21, 33, 35, 36, 53)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_pieces_tile_the_operand_and_fit_one_dsp_each(shape):
    got = pieces(Signal(shape))
    offset = 0
    for k, (off, piece) in enumerate(got):
        top = k == len(got) - 1
        assert off == offset                                    # contiguous, from bit 0
        assert piece.shape().signed == (top and shape.signed)   # only the top carries the sign
        limit = DSP_SIGNED_BITS if piece.shape().signed else DSP_UNSIGNED_BITS
        assert 1 <= len(piece) <= (limit if top else DSP_UNSIGNED_BITS)
        offset += len(piece)
    assert offset == shape.width
    if shape == unsigned(25):       # the normalizer's y: a narrow top piece (LUTs by default)
        assert [len(p) for _, p in got] == [17, 8]


@pytest.mark.parametrize("lut_width, in_dsp", [
    (0, [(17, 17), (17, 8), (8, 17), (8, 8)]),      # every piece in a DSP
    (8, [(17, 17), (17, 8), (8, 17)]),              # a 17-bit side is over twice the width
    (16, [(17, 17)]),                               # the board's width
    (17, []),
])
def test_the_pieces_of_a_wide_product_in_dsps(lut_width, in_dsp):
    """The normalizer's 25 x 25 products, elaborated for ECP5: the pieces that are not
    `lut_built` are MULT18X18D instances, the others ``a * b`` for Yosys's LUTs."""
    from amaranth.hdl import Fragment, Instance, Module

    from attenio.hdl.formats.dsp import ECP5Target, Stages, lut_built, partial_products

    m = Module()
    parts, products = partial_products(Signal(25), Signal(25), name="p")
    st = Stages(m)
    st.stage(products)
    st.stage(products.relay)
    (inner, _, _), = Fragment.get(m, ECP5Target(lut_mul_width=lut_width)).subfragments
    instances = [sub for sub, _, _ in inner.subfragments if isinstance(sub, Instance)]
    assert len(parts) == 4 and len(instances) == len(in_dsp)
    assert all(i.type == "MULT18X18D" for i in instances)
    assert [(wa, wb) for wa in (17, 8) for wb in (17, 8)
            if not lut_built(lut_width, wa, wb)] == in_dsp
