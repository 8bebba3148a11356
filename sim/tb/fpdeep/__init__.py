"""The FPDeep engine's benches: stimulus and expected values from the golden models for the
Amaranth-simulator tests, and cocotb benches under Verilator. :mod:`.fp`, :mod:`.eb`,
:mod:`.sfu`, :mod:`.pg` and :mod:`.update` (the node's modules; ``fp`` has the helpers the
others share), :mod:`.link` (two neighbour link modules back to back), :mod:`.node` (one
node training over mini-batches, run by ``nnrtl sim fpdeep``), :mod:`.chain` (FP modules of
one ICP-split layer joined by links), :mod:`.chain_train` (the training chain of node tops
in the Amaranth simulator, the trainer's ``rtl`` backend) and :mod:`.chain_verilator` (that
chain under Verilator)."""
