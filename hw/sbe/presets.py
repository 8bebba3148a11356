"""The paper's SBE designs as :class:`~nnrtl.hw.presets.Preset` records (Que et al., "Mapping Large
LSTMs to FPGAs with Weight Reuse", 2020)."""

import dataclasses

from ..presets import Preset
from .config import SbeConfig

__all__ = ["ZC706_LSTM256", "VC709_LSTM512", "PRESETS"]


#: The paper's ZC706 design ("Experimental Setup", "Resource Utilization"): the LSTM-256 of
#: LRCN with 1792 input features (2048 x 256 weights per gate), Npe = 1024, B = 64,
#: Nt = 16 (256-bit DMA bus), Nb = 16 ("the proper blocking number is 16"), 4 PPs.
ZC706_LSTM256 = SbeConfig(
    input_size=1792, hidden_size=256, layers=1, seq_len=1024, pes=1024, batch=64,
    blocks=16, bus_weights=16, post_units=4, batch_norm=True, lut_multipliers=224)

#: The paper's VC709 design: LSTM-512 on the same 1792 features with Npe = 2048, 356 GOPS at
#: 125 MHz. B, Nt and Nb are not given; see :data:`PRESETS`.
VC709_LSTM512 = dataclasses.replace(
    ZC706_LSTM256, hidden_size=512, pes=2048, batch=64, blocks=6, bus_weights=32,
    lut_multipliers=0)

PRESETS = {
    "zc706-lstm256": Preset(
        config=ZC706_LSTM256, board="zc706", clock_hz=None,
        source="Paper: LSTM-256, 1792 inputs, Npe=1024, B=64, Nt=16, Nb=16, 4 PPs, 900 "
               "DSPs with a few LUT multipliers (224 here: 1024 - (900 - 4 PPs x 25 DSPs "
               "each)). Chosen here: seq_len=1024 (the 1024 frames of the CPU/GPU comparison), batch_norm=True. "
               "The clock is in the paper's Table 4, which the text does not reproduce."),
    "vc709-lstm512": Preset(
        config=VC709_LSTM512, board="vc709", clock_hz=125e6,
        source="Paper: LSTM-512, 1792 inputs, Npe=2048, 125 MHz, 356 GOPS. Chosen here: "
               "Nt=32 (the 512-bit DMA bus the paper names as the alternative to 256-bit), "
               "B=Npe/Nt=64 (eq. 1), Nb=6: the fewest blocks whose h weights take two "
               "blocks (case 2), as Nb=16 is for the ZC706 design.",
        paper_gops=356.0),
}
