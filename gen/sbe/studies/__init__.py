"""The SBE engine's studies: the benchmark (:mod:`.bench`, the engine's ``bench`` hook: RTL
cycles beside the performance model and the paper's figures) and its tool-speed part
against the PE count (:mod:`.toolspeed`)."""
