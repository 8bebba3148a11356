"""Bit-exact models of the η-LSTM Omni-PE channels (issue 13)."""
