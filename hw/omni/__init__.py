"""η-LSTM Omni-PE channels (issue 13): PEs, channels, R2A and the compressing DMA."""
