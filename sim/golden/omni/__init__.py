"""Bit-exact models of the η-LSTM Omni-PE hardware: :mod:`.pe` (the PE's modes),
:mod:`.channel` (a channel running the FW and BP cell programs) and :mod:`.dma` (the
compressing DMA's write and read paths)."""
