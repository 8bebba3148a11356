"""FARNN designs for the VU9P (Cho et al., TPDS 2022, Sec. 6.1) as :class:`~nnrtl.hw.presets.Preset`
records, each the choice of the design-space exploration (:func:`nnrtl.gen.farnn.explore.
explore`, ranked by the cycle model, under the resource model's budgets) with the numbers it
found written here, beside the spec's derived bounds (``shared/specs/farnn.md`` §1.12).

The exploration's budgets on the VU9P (``boards/vu9p.py``; the fit rule of
:func:`nnrtl.gen.engines.budget`): 6,840 DSP, 960 URAM288, 2,160 BRAM36 and 827,568 LUTs
(0.7 of 1,182,240). A PE is 1,178 LUTs, 497 FF, 2 DSP by Yosys (``gen/farnn/resources.py``),
so the LUTs bind first: about 680 PEs besides the activation units. That is why the
exploration's designs differ from the paper's:

* the paper's 4K configuration (two PEs per URAM; 1,024 cells need ``P_unit >= 256``,
  ``L >= 16``, 1,024 PEs) needs 1,232,663 LUTs: more than the VU9P has, so the exploration
  finds no 4K design for 1,024 cells and takes 8K words per PE (one URAM each);
* the paper's 8K configuration, 768 PEs (``L = 12``), needs 947,191 LUTs > 827,568: the
  exploration stops at ``L = 10``, 640 PEs (:data:`PAPER_8K` keeps the paper's for the
  bench);
* the paper's ``L_LSTM < L_GRU`` holds: 10 < 14 (4 units of 16 chains against 3).

A Vivado synthesis with the vendor's floating-point cores (the paper's) maps more of the
adder into DSPs; a smaller PE would let the exploration reach the paper's PE counts.
Figures: ``explore(FarnnConfig(...), "vu9p")`` at 400 MHz, PCIe 12.5 GB/s, 5 layers,
``seq_len`` 1,600, batch 1, cycles of one training step's FPGA part (FW and BW of every
layer, weight loads exposed), ``schedule="overlap"``.
"""

import dataclasses

from ..presets import Preset
from .config import FarnnConfig

__all__ = ["VU9P_LSTM1024", "VU9P_GRU1280", "PAPER_8K", "PRESETS"]


#: LSTM, 1,024 cells, 5 layers, T = 1,600, batch 1 on the VU9P: the exploration's best of
#: 15 feasible configurations: L = 10 (640 PEs, 160 per unit), 8K words, split 2 (7 rounds,
#: the last 64 rows split: 6 x 1,024 + 512 = 6,656 MAC cycles and words per PE).
#: 113,181,790 cycles (282.95 ms), U = 92.6% (96.8% double-buffered); 1,330 DSP,
#: 796,407 LUT, 640 URAM, 29 BRAM36. Split 1: 121,793,180 cycles (86.1%).
#: Spec bounds: 4K needs L >= 16 (1,024 PEs); 8K needs P_unit >= 128 (L >= 8, 512 PEs);
#: URAM allows 960 PEs at 8K.
VU9P_LSTM1024 = FarnnConfig(cell="lstm", input_size=1024, hidden_size=1024, layers=5,
                            seq_len=1600, batch=1, chain_length=10, chains=16,
                            weight_depth=8192, split=2)

#: GRU, 1,280 cells, 5 layers, T = 1,600, batch 1 on the VU9P: the best of 3 feasible:
#: L = 14 (672 PEs, 224 per unit), 8K words, split 1 (6 rounds, 7,680 words per PE).
#: 130,544,070 cycles (326.36 ms), U = 89.6% (93.9% double-buffered); 1,378 DSP,
#: 810,398 LUT, 672 URAM, 17 BRAM36. Spec bounds: 4K needs P_unit >= 427 (L >= 27,
#: 1,296 PEs); 8K needs P_unit >= 214 (L >= 14): the LUTs allow exactly L = 14.
VU9P_GRU1280 = FarnnConfig(cell="gru", input_size=1280, hidden_size=1280, layers=5,
                           seq_len=1600, batch=1, chain_length=14, chains=16,
                           weight_depth=8192, split=1)

#: The paper's 8K configuration as it states it ("8K parameters per PE at the cost of
#: reduced total PE count (768)", Sec. 6.1): 768 PEs = 4 units x 16 chains x L = 12, split
#: 2 (6 rounds, 5,632 words per PE). Not a preset: 947,191 LUTs exceed the VU9P's budget
#: (the module docstring); the exploration's 8K design is :data:`VU9P_LSTM1024`.
PAPER_8K = dataclasses.replace(VU9P_LSTM1024, chain_length=12, split=2)

PRESETS = {
    "vu9p-lstm1024": Preset(
        config=VU9P_LSTM1024, board="vu9p", clock_hz=400e6,
        source="Exploration on the VU9P for 5 x 1,024 LSTM cells, T = 1,600, batch 1: "
               "L = 10 (640 PEs), 8K words, split 2; U = 92.6% (96.8% double-buffered). "
               "The paper's 4K words per PE needs 1,024 PEs, 1.23 M LUTs here: no 4K "
               "design fits."),
    "vu9p-gru1280": Preset(
        config=VU9P_GRU1280, board="vu9p", clock_hz=400e6,
        source="Exploration on the VU9P for 5 x 1,280 GRU cells, T = 1,600, batch 1: "
               "L = 14 (672 PEs), 8K words, split 1; U = 89.6% (93.9% double-buffered)."),
}
