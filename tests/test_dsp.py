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
