"""FARNN designs for the VU9P (Cho et al., TPDS 2022, Sec. 6.1) as :class:`~nnrtl.hw.presets.Preset`
records, each the choice of the design-space exploration (:func:`nnrtl.gen.farnn.explore.
explore`, ranked by the cycle model, under the resource model's budgets) with the numbers it
found written here, beside the spec's derived bounds (``docs/engines/farnn/spec.md`` §1.12).

The exploration's budgets on the VU9P (``boards/vu9p.py``; the fit rule of
:func:`nnrtl.gen.engines.budget`): 6,840 DSP, 960 URAM288, 2,160 BRAM36 and 827,568 LUTs
(0.7 of 1,182,240). A PE is 1,259 LUTs, 473 FF, 2 DSP and one URAM288 at 8K words (1,210
LUTs at 4K) by Yosys (``gen/farnn/resources.py``), so the LUTs bind first: about 620 PEs
at 8K besides the activation units. That is why the exploration's designs differ from the
paper's:

* the paper's 4K configuration (two PEs per URAM; 1,024 cells need ``P_unit >= 256``,
  ``L >= 16``, 1,024 PEs) needs 1,265,431 LUTs and, with one URAM a PE as this RTL builds
  it, 1,024 URAMs: more than the VU9P has of either, so the exploration finds no 4K design
  for 1,024 cells and takes 8K words per PE;
* the paper's 8K configuration, 768 PEs (``L = 12``), needs 1,009,399 LUTs > 827,568: the
  exploration stops at ``L = 9``, 576 PEs (:data:`PAPER_8K` keeps the paper's for the
  bench);
* the paper's ``L_LSTM < L_GRU`` holds: 9 < 13 (4 units of 16 chains against 3).

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
#: 10 feasible configurations: L = 9 (576 PEs, 144 per unit), 8K words, split 8 (8 rounds,
#: the last 16 rows split: 7 x 1,024 + 128 = 7,296 MAC cycles and words per PE).
#: 124,446,620 cycles (311.1 ms), U = 93.6% (double-buffered: see the bench); 1,202 DSP,
#: 779,743 LUT, 576 URAM, 53 BRAM36. Split 1: 139,134,695 cycles (83.7%).
#: Spec bounds: 4K needs L >= 16 (1,024 PEs); 8K needs P_unit >= 128 (L >= 8, 512 PEs);
#: URAM allows 960 PEs.
VU9P_LSTM1024 = FarnnConfig(cell="lstm", input_size=1024, hidden_size=1024, layers=5,
                            seq_len=1600, batch=1, chain_length=9, chains=16,
                            weight_depth=8192, split=8)

#: GRU, 1,280 cells, 5 layers, T = 1,600, batch 1 on the VU9P: the only feasible design:
#: L = 13 (624 PEs, 208 per unit), 8K words, split 4 (7 rounds, the last 32 rows split:
#: 6 x 1,280 + 320 = 8,000 words per PE). 136,589,460 cycles (341.5 ms), U = 92.2%
#: (96.3% double-buffered); 1,282 DSP, 822,506 LUT, 624 URAM, 35 BRAM36. Split 1:
#: 152,711,320 cycles (82.5%). Spec bounds: 4K needs P_unit >= 427 (L >= 27, 1,296 PEs);
#: 8K needs P_unit >= 214 (L >= 14) for 6 rounds: the LUTs allow L = 13 and 7 rounds.
VU9P_GRU1280 = FarnnConfig(cell="gru", input_size=1280, hidden_size=1280, layers=5,
                           seq_len=1600, batch=1, chain_length=13, chains=16,
                           weight_depth=8192, split=4)

#: The paper's 8K configuration as it states it ("8K parameters per PE at the cost of
#: reduced total PE count (768)", Sec. 6.1): 768 PEs = 4 units x 16 chains x L = 12, split
#: 2 (6 rounds, 5,632 words per PE). Not a preset: 1,009,399 LUTs exceed the VU9P's budget
#: (the module docstring); the exploration's 8K design is :data:`VU9P_LSTM1024`.
PAPER_8K = dataclasses.replace(VU9P_LSTM1024, chain_length=12, split=2)

PRESETS = {
    "vu9p-lstm1024": Preset(
        config=VU9P_LSTM1024, board="vu9p", clock_hz=400e6,
        source="Exploration on the VU9P for 5 x 1,024 LSTM cells, T = 1,600, batch 1: "
               "L = 9 (576 PEs), 8K words, split 8; U = 93.5% (97.3% double-buffered). "
               "The paper's 4K words per PE needs 1,024 PEs, 1.27 M LUTs here: no 4K "
               "design fits."),
    "vu9p-gru1280": Preset(
        config=VU9P_GRU1280, board="vu9p", clock_hz=400e6,
        source="Exploration on the VU9P for 5 x 1,280 GRU cells, T = 1,600, batch 1: "
               "L = 13 (624 PEs), 8K words, split 4; U = 92.2% (96.3% double-buffered)."),
}
