"""Bit-exact models of the η-LSTM Omni-PE hardware: :mod:`.pe` (the PE's modes) and
:mod:`.dma` (the compressing DMA's write and read paths)."""
