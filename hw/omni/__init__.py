"""η-LSTM Omni-PE channels (spec omni.md §3): the RTL units."""
