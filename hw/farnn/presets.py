"""FARNN designs for the VU9P (Cho et al., TPDS 2022, Sec. 6.1) as :class:`~nnrtl.hw.presets.Preset`
records, each the choice of the design-space exploration (:func:`nnrtl.gen.farnn.explore.
explore`, ranked by the cycle model, under the resource model's budgets) with the numbers it
found written here, beside the spec's derived bounds (``docs/engines/farnn/spec.md`` §1.12).

The exploration's budgets on the VU9P (``boards/vu9p.py``; the fit rule of
:func:`nnrtl.gen.engines.budget`): 6,840 DSP, 960 URAM288, 2,160 BRAM36 and 827,568 LUTs
(0.7 of 1,182,240). By Yosys (``gen/farnn/resources.py``) a PE at 4K words is 681 LUTs and
6 DSP at DSP usage ``"max"`` (its shifts on DSP slices), 915 LUTs and 2 DSP at ``"some"``
(its shifts in LUTs), and half a URAM288 at 4K words (two PEs share one,
:class:`~nnrtl.hw.farnn.pair.PEPair`), one at 8K:

* the paper's 4K configuration (two PEs per URAM; 1,024 cells need ``P_unit >= 256``,
  ``L >= 16``, 1,024 PEs) fits at DSP usage ``"max"``: 725,894 LUTs, 6,194 DSP, 512 URAM.
  The exploration's fastest design is one PE longer a chain (``L = 17``, 1,088 PEs) for
  0.1% fewer cycles; ``--objective per-dsp`` picks the paper's;
* the paper's 8K configuration, 768 PEs (``L = 12``), fits at ``"max"`` and at ``"some"``;
* the paper's ``L_LSTM < L_GRU`` holds: 16 < 20 (4 units of 16 chains against 3).

Figures: ``explore(FarnnConfig(...), "vu9p")`` at 400 MHz, PCIe 12.5 GB/s, 5 layers,
``seq_len`` 1,600, batch 1, cycles of one training step's FPGA part (FW and BW of every
layer, weight loads exposed), ``schedule="overlap"``.
"""

import dataclasses

from ..presets import Preset
from .config import FarnnConfig

__all__ = ["VU9P_LSTM1024", "VU9P_GRU1280", "PAPER_8K", "PRESETS"]


#: LSTM, 1,024 cells, 5 layers, T = 1,600, batch 1 on the VU9P: the paper's 4K design,
#: 1,024 PEs (L = 16, 256 per unit, two per URAM288), split 1 (4 rounds: 4 x 1,024 =
#: 4,096 words per PE), DSP usage max: 75,603,555 cycles (189.0 ms), U = 86.7%
#: (92.6% double-buffered); 6,194 DSP, 725,894 LUT, 512 URAM, 25 BRAM36. The
#: exploration's fastest is L = 17 (1,088 PEs): 75,523,015 cycles; at DSP usage some
#: the best is L = 13 at 8K words (832 PEs): 91,474,350 cycles.
VU9P_LSTM1024 = FarnnConfig(cell="lstm", input_size=1024, hidden_size=1024, layers=5,
                            seq_len=1600, batch=1, chain_length=16, chains=16,
                            weight_depth=4096, split=1, dsp_usage="max")

#: GRU, 1,280 cells, 5 layers, T = 1,600, batch 1 on the VU9P: the exploration's best of
#: 57 feasible configurations: L = 20 (960 PEs, 320 per unit, every URAM288), 8K words,
#: split 1 (5 rounds: 5 x 1,280 = 6,400 words per PE), DSP usage max:
#: 93,928,705 cycles (234.8 ms), U = 87.2% (92.8% double-buffered); 5,794 DSP, 696,981
#: LUT, 960 URAM, 17 BRAM36. At DSP usage some the best is L = 17 (816 PEs):
#: 113,307,750 cycles. Spec bounds: 4K needs P_unit >= 427 (L >= 27, 1,296 PEs); 8K
#: needs P_unit >= 214 (L >= 14) for 6 rounds.
VU9P_GRU1280 = FarnnConfig(cell="gru", input_size=1280, hidden_size=1280, layers=5,
                           seq_len=1600, batch=1, chain_length=20, chains=16,
                           weight_depth=8192, split=1, dsp_usage="max")

#: The paper's 8K configuration as it states it ("8K parameters per PE at the cost of
#: reduced total PE count (768)", Sec. 6.1): 768 PEs = 4 units x 16 chains x L = 12, split
#: 2 (6 rounds, 5,632 words per PE), DSP usage max: it fits the VU9P (580,678 LUTs,
#: 4,754 DSP, 768 URAM; 769,766 LUTs at DSP usage some, also within the budget).
PAPER_8K = dataclasses.replace(VU9P_LSTM1024, chain_length=12, weight_depth=8192, split=2)

PRESETS = {
    "vu9p-lstm1024": Preset(
        config=VU9P_LSTM1024, board="vu9p", clock_hz=400e6,
        source="The paper's 4K design for 5 x 1,024 LSTM cells, T = 1,600, batch 1 on the "
               "VU9P: L = 16 (1,024 PEs, two per URAM288), 4K words, split 1, DSP usage "
               "max; U = 86.7% (92.6% double-buffered). The exploration's fastest "
               "(L = 17, 1,088 PEs) takes 0.1% fewer cycles; --objective per-dsp picks this."),
    "vu9p-gru1280": Preset(
        config=VU9P_GRU1280, board="vu9p", clock_hz=400e6,
        source="Exploration on the VU9P for 5 x 1,280 GRU cells, T = 1,600, batch 1: "
               "L = 20 (960 PEs), 8K words, split 1, DSP usage max; "
               "U = 87.2% (92.8% double-buffered)."),
}
