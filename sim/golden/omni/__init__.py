"""Bit-exact models of the η-LSTM Omni-PE hardware (:mod:`.pe`)."""
