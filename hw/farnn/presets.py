"""FARNN designs for the VU9P (Cho et al., TPDS 2022, Sec. 6.1) as :class:`~nnrtl.hw.presets.Preset`
records, each the choice of the design-space exploration (:func:`nnrtl.gen.farnn.explore.
explore`, ranked by the cycle model, under the resource model's budgets) with the numbers it
found written here, beside the spec's derived bounds (``docs/engines/farnn/spec.md`` §1.12).

The exploration's budgets on the VU9P (``boards/vu9p.py``; the fit rule of
:func:`nnrtl.gen.engines.budget`): 6,840 DSP, 960 URAM288, 2,160 BRAM36 and 827,568 LUTs
(0.7 of 1,182,240). By Yosys (``gen/farnn/resources.py``) a PE at 8K words is 1,088
LUTs and 2 DSP with its adders' shifts in LUTs (``adder_shifts="lut"``), 936 LUTs and 5
DSP with them on DSP slices (``"dsp"``), and one URAM288 at either depth, so the LUTs bind
first and the exploration takes the DSP shifts:

* the paper's 4K configuration (two PEs per URAM; 1,024 cells need ``P_unit >= 256``,
  ``L >= 16``, 1,024 PEs) needs 963,142 LUTs with the DSP shifts and, with one URAM a
  PE as this RTL builds it, 1,024 URAMs: more than the VU9P has of either, so the
  exploration finds no 4K design for 1,024 cells and takes 8K words per PE;
* the paper's 8K configuration, 768 PEs (``L = 12``), fits (751,878 LUTs, 3,986 DSP),
  and the exploration goes one PE further a chain: ``L = 13``, 832 PEs;
* the paper's ``L_LSTM < L_GRU`` holds: 13 < 18 (4 units of 16 chains against 3).

Figures: ``explore(FarnnConfig(...), "vu9p")`` at 400 MHz, PCIe 12.5 GB/s, 5 layers,
``seq_len`` 1,600, batch 1, cycles of one training step's FPGA part (FW and BW of every
layer, weight loads exposed), ``schedule="overlap"``.
"""

import dataclasses

from ..presets import Preset
from .config import FarnnConfig

__all__ = ["VU9P_LSTM1024", "VU9P_GRU1280", "PAPER_8K", "PRESETS"]


#: LSTM, 1,024 cells, 5 layers, T = 1,600, batch 1 on the VU9P: the exploration's best of
#: 50 feasible configurations: L = 13 (832 PEs, 208 per unit), 8K words, split 1 (5
#: rounds: 5 x 1,024 = 5,120 words per PE), the adders' shifts on DSP slices.
#: 91,474,350 cycles (228.7 ms), U = 88.2% (93.2% double-buffered); 4,210 DSP, 800,838
#: LUT, 832 URAM, 25 BRAM36. With the shifts in LUTs the best is L = 11 (704 PEs):
#: 107,377,275 cycles. Spec bounds: 4K needs L >= 16 (1,024 PEs); 8K needs P_unit >= 128
#: (L >= 8, 512 PEs); URAM allows 960 PEs.
VU9P_LSTM1024 = FarnnConfig(cell="lstm", input_size=1024, hidden_size=1024, layers=5,
                            seq_len=1600, batch=1, chain_length=13, chains=16,
                            weight_depth=8192, split=1, adder_shifts="dsp")

#: GRU, 1,280 cells, 5 layers, T = 1,600, batch 1 on the VU9P: the exploration's best of
#: 33 feasible configurations: L = 18 (864 PEs, 288 per unit), 8K words, split 1 (5
#: rounds: 5 x 1,280 = 6,400 words per PE), the adders' shifts on DSP slices.
#: 112,837,130 cycles (282.1 ms), U = 80.6% (85.5% double-buffered); 4,354 DSP, 824,613
#: LUT, 864 URAM, 17 BRAM36. With the shifts in LUTs the best is L = 15 (720 PEs, split
#: 2): 121,796,425 cycles. Spec bounds: 4K needs P_unit >= 427 (L >= 27, 1,296 PEs); 8K
#: needs P_unit >= 214 (L >= 14) for 6 rounds.
VU9P_GRU1280 = FarnnConfig(cell="gru", input_size=1280, hidden_size=1280, layers=5,
                           seq_len=1600, batch=1, chain_length=18, chains=16,
                           weight_depth=8192, split=1, adder_shifts="dsp")

#: The paper's 8K configuration as it states it ("8K parameters per PE at the cost of
#: reduced total PE count (768)", Sec. 6.1): 768 PEs = 4 units x 16 chains x L = 12, split
#: 2 (6 rounds, 5,632 words per PE), the adders' shifts on DSP slices: it fits the VU9P
#: (751,878 LUTs; 873,766 with the shifts in LUTs, over the budget), and the exploration's
#: 8K design, :data:`VU9P_LSTM1024`, is one PE longer a chain.
PAPER_8K = dataclasses.replace(VU9P_LSTM1024, chain_length=12, split=2)

PRESETS = {
    "vu9p-lstm1024": Preset(
        config=VU9P_LSTM1024, board="vu9p", clock_hz=400e6,
        source="Exploration on the VU9P for 5 x 1,024 LSTM cells, T = 1,600, batch 1: "
               "L = 13 (832 PEs), 8K words, split 1, the adders' shifts on DSP slices; "
               "U = 88.2% (93.2% double-buffered). The paper's 4K words per PE needs 1,024 "
               "PEs, 963,142 LUTs and 1,024 URAMs here: no 4K design fits."),
    "vu9p-gru1280": Preset(
        config=VU9P_GRU1280, board="vu9p", clock_hz=400e6,
        source="Exploration on the VU9P for 5 x 1,280 GRU cells, T = 1,600, batch 1: "
               "L = 18 (864 PEs), 8K words, split 1, the adders' shifts on DSP slices; "
               "U = 80.6% (85.5% double-buffered)."),
}
