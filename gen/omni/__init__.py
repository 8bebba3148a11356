"""η-LSTM (Omni-PE channels) software: LSTM training with the paper's FW/BP decomposition,
the memory-saving optimizations MS1 (BP-EW-P1 in FW, pruned and compressed) and MS2
(BP-cell skipping), and the footprint and data-movement accounting (spec omni.md §1, §2,
§5.5-5.6). The hardware (hw/omni) and its golden models build on these."""
