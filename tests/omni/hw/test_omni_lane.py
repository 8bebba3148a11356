# amaranth: UnusedElaboratable=no
"""The Omni-PE lane (hw/omni/lane.py): its check. Its datapath is tested driven by a PE
control: alone as the Omni-PE (tests/omni/hw/test_omni_pe.py), beside another lane on other
data (tests/omni/hw/test_omni_pe_control.py), in a channel (tests/omni/hw/test_omni_channel.py).
"""

import pytest

from nnrtl.hw.arith.float_format import BF16
from nnrtl.hw.omni.config import LUTRAM_BITS, OmniPEConfig
from nnrtl.hw.omni.lane import OmniLane
from nnrtl.sim.runner import to_verilog


def test_validation():
    with pytest.raises(TypeError, match=r"^config must be an OmniPEConfig, not 'pe'$"):
        OmniLane("pe")


def test_queue_entries_beyond_two_lutram_primitives_are_flip_flops():
    """fp32: the 4 bits of a 4-deep queue's entry beyond 2 x 14 LUT-RAM bits are rows of
    flip-flops written on the control's one-hot row strobes; the 8-deep Partial Output
    Queue (an 8:1 read MUX would cost what the primitive does) is LUT-RAM whole; bf16's
    16 bits leave 2."""
    config = OmniPEConfig()
    assert LUTRAM_BITS == 14
    assert config.queue_depths == {"input1": 4, "input2": 4, "partial": 8, "output": 4}
    assert [config.queue_register_bits(depth) for depth in (2, 4, 8)] == [4, 4, 0]
    assert OmniPEConfig(fmt=BF16, adder_shifts="lut").queue_register_bits(4) == 2
    fields = dict(config.lane_control_layout)
    assert [fields[f"{name}_rows"].shape for name in ("input1", "input2", "output")] == [4] * 3
    assert "partial_rows" not in fields
    # no broadcast register: an outer product's operand stays at the Input1 queue's head
    assert not {"use_broadcast", "load_broadcast"} & set(fields)
    text = to_verilog(OmniLane(config), "lane")
    assert "input1_row_3" in text and "partial_row_0" not in text
