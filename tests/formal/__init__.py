"""Formal proofs of the handshakes, run through SymbiYosys (see docs/verification.md)."""
