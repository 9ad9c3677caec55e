"""cocotb benches, one module per block; launched from tests/ through attenio.sim.runner."""
