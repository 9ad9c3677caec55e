"""attenio.sim: simulation of the generated Verilog.

Golden models, the end-to-end runs on cocotb or the fast C++ path, the benches and
their testbench library, the board's host script. The performance models it checks
the RTL against live in `attenio.model`.
"""
