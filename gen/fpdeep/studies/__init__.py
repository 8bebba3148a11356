"""The FPDeep engine's studies: the bench beside the paper (:mod:`.bench`, the engine's
``bench`` hook: Table 6, scaling with the FPGA count, cluster-simulator points, the node's
resources) and its markdown and plots (:mod:`.bench_markdown`)."""
