"""The η-LSTM engine's benches, cocotb under Verilator against the golden models (the first
four with an Amaranth-simulator driver too): :mod:`.pe` (one Omni-PE), :mod:`.channel` (a
channel running one FW and one BP cell, with the scratchpad model the others share),
:mod:`.r2a` (the R2A scheduler on random task graphs), :mod:`.top` (the whole top, run by
``nnrtl sim omni``), :mod:`.dma` (the compressing DMA against an AXI RAM) and :mod:`.train`
(the channel running one layer pass of a training step: the trainer's ``rtl`` backend)."""
