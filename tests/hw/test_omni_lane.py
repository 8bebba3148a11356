# amaranth: UnusedElaboratable=no
"""The Omni-PE lane (hw/omni/lane.py): its check. Its datapath is tested driven by a PE
control: alone as the Omni-PE (tests/hw/test_omni_pe.py), beside another lane on other
data (tests/hw/test_omni_pe_control.py), in a channel (tests/hw/test_omni_channel.py).
"""

import pytest

from nnrtl.hw.omni.lane import OmniLane


def test_validation():
    with pytest.raises(TypeError, match=r"^config must be an OmniPEConfig, not 'pe'$"):
        OmniLane("pe")
