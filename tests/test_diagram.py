"""docs/microarchitecture.md shows the design as the generator elaborates it."""

from attenio.gen.diagram import BEGIN, DOC, END, doc_block, small_preset_diagram


def test_the_documented_component_diagram_is_the_elaborated_design():
    page = DOC.read_text()
    assert BEGIN in page and END in page, "the diagram markers are gone from the page"
    documented = BEGIN + page.split(BEGIN, 1)[1].split(END, 1)[0] + END
    assert documented == doc_block(small_preset_diagram()), (
        "docs/microarchitecture.md is out of date: run `python -m attenio.gen.diagram`")


def test_the_diagram_names_every_block_of_the_core():
    text = small_preset_diagram()
    for block in ("KVBuffer (hdl/kv_buffer.py)", "RowReplay (hdl/replay.py)",
                  "PEArray (hdl/pe_array.py)", "MAC (hdl/mac.py)", "SoftmaxLane (hdl/softmax.py)",
                  "Normalizer (hdl/normalizer.py)", "TagJoin (hdl/tag_join.py)"):
        assert block in text
    assert "mac[0..3]: MAC" in text            # the small preset's 4 MACs a line, drawn once
