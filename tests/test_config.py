import dataclasses

import pytest

from attenio import (BF16Format, Budget, Config, ConfigError, FloatFormat, FP16Format, Int8Format,
                     Workload, preset, resolve)


def test_presets_match_the_design():
    paper = preset("paper")
    b = paper.budget
    assert (b.mac_lines, b.macs_per_line, b.exp_units) == (64, 32, 128)
    assert (b.cache_bytes, b.bw_bytes_per_cycle, b.clock_mhz) == (512 * 1024, 128, 1000)
    assert b.kv_buffer_bytes == 256
    assert isinstance(paper.format, FloatFormat)
    small = preset("small")
    assert isinstance(small.format, Int8Format)
    assert small.budget.macs <= 16 and small.budget.cache_bytes <= 8 * 1024


def test_configuration_objects_are_frozen():
    w = Workload(seq_len=8, head_dim=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.seq_len = 9


@pytest.mark.parametrize("kwargs, message", [
    ({"seq_len": 0, "head_dim": 4}, "seq_len must be a positive integer, not 0"),
    ({"seq_len": 8, "head_dim": 2.5}, "head_dim must be a positive integer, not 2.5"),
    ({"seq_len": 8, "head_dim": 4, "heads": True}, "heads must be a positive integer, not True"),
    ({"seq_len": 8, "head_dim": 4, "causal": 1}, "causal must be true or false, not 1"),
    ({"seq_len": 8, "head_dim": 4, "kv_len": 0}, "kv_len must be a positive integer, not 0"),
    ({"seq_len": 8, "head_dim": 4, "heads": 4, "kv_heads": 3},
     "heads = 4 must be a multiple of kv_heads = 3"),
    ({"seq_len": 8, "head_dim": 4, "kv_len": 7, "causal": True},
     "causal attention needs kv_len >= seq_len, not 7 < 8"),
])
def test_workload_rejects_bad_values(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Workload(**kwargs)


def test_budget_rejects_bad_values():
    good = dataclasses.asdict(preset("small").budget)
    with pytest.raises(ConfigError, match="axi_data_bits must be one of"):
        Budget(**{**good, "axi_data_bits": 48})
    with pytest.raises(ConfigError, match="budget: latency_cycles must be an integer >= 0, not -1"):
        Budget(**{**good, "latency_cycles": -1})
    with pytest.raises(ConfigError, match="exp_units must be a positive integer, not 0"):
        Budget(**{**good, "exp_units": 0})


@pytest.mark.parametrize("split, message", [
    (0, "config: split must be a positive integer, not 0"),
    (True, "config: split must be a positive integer, not True"),
    ("auto", "config: split must be a positive integer, not 'auto'"),
    (2.0, "config: split must be a positive integer, not 2.0"),
])
def test_config_split_is_a_positive_integer_or_none(split, message):
    small = preset("small")
    assert small.split is None and preset("paper").split is None     # the planner chooses
    assert dataclasses.replace(small, split=4).split == 4
    with pytest.raises(ConfigError, match=message):
        Config(workload=small.workload, budget=small.budget, split=split)


@pytest.mark.parametrize("table, option, split", [
    ("", None, None),
    ("[mapping]\nsplit = 2\n", None, 2),
    ('[mapping]\nsplit = "auto"\n', None, None),
    ("[mapping]\nsplit = 2\n", "auto", None),       # the option beats the file
    ("[mapping]\nsplit = 2\n", 4, 4),
    ("", 4, 4),
])
def test_toml_mapping_table_and_the_split_option(tmp_path, table, option, split):
    f = tmp_path / "c.toml"
    f.write_text(table)
    assert resolve(config_file=f, split=option).split == split


@pytest.mark.parametrize("table, option, rows", [
    ("", None, None),
    ("[mapping]\nrows_per_mac = 3\n", None, 3),
    ("[mapping]\nrows_per_mac = 3\n", "auto", None),   # the option beats the file
    ("", 2, 2),
])
def test_toml_mapping_table_and_the_rows_option(tmp_path, table, option, rows):
    f = tmp_path / "c.toml"
    f.write_text(table)
    assert resolve(config_file=f, rows_per_mac=option).rows_per_mac == rows
    if rows is None:
        return
    with pytest.raises(ConfigError, match="config: rows_per_mac must be a positive integer, not 0"):
        dataclasses.replace(resolve(config_file=f), rows_per_mac=0)


def test_toml_then_options_override_the_preset(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('preset = "paper"\nname = "mine"\n[workload]\nseq_len = 8192\nhead_dim = 128\n'
                 '[budget]\nexp_units = 64\n')
    c = resolve(config_file=f, workload={"seq_len": 16384, "heads": None})
    assert c.name == "mine"
    assert c.workload.seq_len == 16384          # option beats file
    assert c.workload.head_dim == 128           # file beats preset
    assert c.budget.exp_units == 64
    assert c.budget.mac_lines == 64             # preset fills the rest
    assert isinstance(c.format, FloatFormat)


def test_toml_format_table(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[format]\nname = "int8"\np_frac = 12\n')
    assert resolve(config_file=f).format.p_frac == 12


@pytest.mark.parametrize("text", ['[format]\nname = "bf16"\n', 'format = "bf16"\n'])
def test_toml_names_bf16(tmp_path, text):
    f = tmp_path / "c.toml"
    f.write_text('preset = "paper"\n' + text)
    c = resolve(config_file=f)
    assert c.format == BF16Format() and c.format.name == "bf16"
    assert resolve(config_file=f, format_name="fp16").format == FP16Format()     # option wins
    assert resolve(config_file=f, format_name="int8").format == Int8Format()


def test_toml_format_table_fields_reach_bf16(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[format]\nname = "bf16"\np_frac = 16\no_acc_bits = 16\n')
    assert resolve(config_file=f).format == BF16Format(p_frac=16, o_acc_bits=16)
    # the table's fields go to the format the option names
    assert resolve(config_file=f, format_name="fp16").format == FP16Format(p_frac=16,
                                                                           o_acc_bits=16)


@pytest.mark.parametrize("text, message", [
    ("workload = [", "is not valid TOML"),
    ('[format]\nname = "bf16"\nx_frac = 40\n',
     r"^bf16 format: x_frac must be at most 29, not 40: the exp2 argument"),
    ('[format]\nname = "bf16"\nc_frac = 20\n',
     r"^format 'bf16' has no field\(s\) c_frac; its fields are o_acc_bits, x_frac, p_frac, "
     r"exp_lut_bits, exp_interp, exp_guard, recip_seed_bits, recip_iters, recip_frac$"),
    ('[format]\nname = "int8"\nq_frac = 20\n',
     r"^format 'int8' has no field\(s\) q_frac; its fields are c_int, c_frac, x_frac, p_frac, "
     r"exp_lut_bits, exp_interp, exp_guard, recip_seed_bits, recip_iters, recip_frac$"),
    ('[format]\nname = "bf16"\no_acc_bits = 24\n',
     r"^bf16 format: o_acc_bits must be one of 16, 32, not 24$"),
    ("[workload]\nseq_length = 3\n", r"\[workload\] has unknown key\(s\) seq_length"),
    ("colour = 1\n", r"unknown key\(s\) colour"),
    ('preset = "huge"\n', "unknown preset 'huge'"),
    ('format = "fp8"\n', "unknown format 'fp8'"),
    ("[workload]\nseq_len = -4\n", "seq_len must be a positive integer, not -4"),
    ("mapping = 2\n", r"\[mapping\] must be a table"),
    ("[mapping]\ns = 2\n", r"\[mapping\] has unknown key\(s\) s; expected banks, rows_per_mac, split"),
    ("[mapping]\nsplit = 0\n", r'\[mapping\] split must be a positive integer or "auto", not 0'),
    ('[mapping]\nsplit = "wide"\n',
     r'\[mapping\] split must be a positive integer or "auto", not \'wide\''),
    ("[mapping]\nrows_per_mac = -1\n",
     r'\[mapping\] rows_per_mac must be a positive integer or "auto", not -1'),
])
def test_toml_errors_are_clear(tmp_path, text, message):
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=message):
        resolve(config_file=f)


def test_missing_toml_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        resolve(config_file=tmp_path / "nope.toml")


def test_workload_kv_len_kv_heads_and_max_keys():
    """None means "as the queries"; the hardware holds the larger of N and N_kv."""
    w = Workload(seq_len=8, head_dim=4, heads=6)
    assert (w.n_kv, w.n_kv_heads, w.group, w.max_keys) == (8, 6, 1, 8)
    w = Workload(seq_len=1, head_dim=4, heads=6, kv_heads=2, kv_len=300)
    assert (w.n_kv, w.n_kv_heads, w.group, w.max_keys) == (300, 2, 3, 300)
    assert Workload(seq_len=50, head_dim=4, kv_len=20).max_keys == 50


def test_toml_is_read_only_from_a_regular_file_of_bounded_size(tmp_path):
    """No path makes the reader wait or grow: a FIFO is not opened for reading, /dev/zero
    and a file past TOML_MAX_BYTES are measured and refused before a byte is read."""
    import os

    from attenio.config import TOML_MAX_BYTES

    os.mkfifo(tmp_path / "fifo.toml")
    (tmp_path / "dir.toml").mkdir()
    with open(tmp_path / "big.toml", "wb") as f:
        f.truncate(TOML_MAX_BYTES + 1)
    for path in (tmp_path / "fifo.toml", tmp_path / "dir.toml", "/dev/zero"):
        with pytest.raises(ConfigError, match=f"config file '{path}' is not a regular file$"):
            resolve(config_file=path)
    with pytest.raises(ConfigError, match=f"is {TOML_MAX_BYTES + 1} bytes, more than the "
                                          f"{TOML_MAX_BYTES} a TOML file may hold here"):
        resolve(config_file=tmp_path / "big.toml")


@pytest.mark.parametrize("body, message", [
    (bytes(range(256)), "is not UTF-8 text"),
    ('name = "x"\n'.encode("utf-16"), "is not UTF-8 text"),
    (("x = " + "[" * 3000 + "]" * 3000).encode(), "nests arrays or tables too deeply"),
    ('preset = ["small"]\n'.encode(), r"preset must be a string, not \['small'\]"),
    ('[format]\nname = 8\n'.encode(), "format name must be a string, not 8"),
])
def test_toml_that_is_not_a_configuration_is_one_clear_error(tmp_path, body, message):
    f = tmp_path / "c.toml"
    f.write_bytes(body)
    with pytest.raises(ConfigError, match=message):
        resolve(config_file=f)
