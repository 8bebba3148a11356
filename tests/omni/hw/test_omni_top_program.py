"""The top's tiles (nnrtl.hw.omni.top_program.tile_steps, unit_tiles): the tiles of a part
write exactly the elements the untiled cell program writes, as often; MS1 moves
BP-EW-P1 from ``bp_ew`` to ``fw_ew``; an unknown part is refused."""

import numpy as np
import pytest

from nnrtl.hw.omni.channel_program import bp_program, fw_program
from nnrtl.hw.omni.config import OmniMode
from nnrtl.hw.omni.top_config import OmniConfig
from nnrtl.hw.omni.top_program import tile_steps, unit_tiles

CHANNEL = OmniConfig(input_size=3, hidden_size=7, channels=3, pes_per_channel=4,
                     swing_channels=1).layer_channel(0)


def _writes(steps):
    """``{vector: sorted element indices}`` the steps write (with repeats)."""
    out = {}
    for step in steps:
        out.setdefault(step.result.name, []).extend(np.ravel(step.result.index).tolist())
    return {name: sorted(v) for name, v in out.items()}


def test_unit_tiles():
    assert unit_tiles(7, 3) == [(0, 3), (3, 2), (5, 2)]
    assert unit_tiles(2, 4) == [(0, 1), (1, 1)]


@pytest.mark.parametrize("tiles", [1, 3, 7])
def test_tiles_write_what_the_cell_programs_write(tiles):
    units = unit_tiles(CHANNEL.hidden_size, tiles)
    inputs = unit_tiles(CHANNEL.input_size, tiles)

    def part(name, slices, ms1=False):
        return [s for first, count in slices
                for s in tile_steps(CHANNEL, name, first, count, ms1=ms1)]

    fw, bp = fw_program(CHANNEL), bp_program(CHANNEL)
    mvm = [s for s in fw if s.instruction.job.mode is OmniMode.MVM]
    assert _writes(part("fw_mm", units)) == _writes(mvm)
    assert _writes(part("fw_ew", units)) == _writes(fw[len(mvm):])
    assert _writes(part("bp_ew", units)) == _writes(
        [s for s in bp if s.result.name not in ("dz", "dw_cell", "dw", "db")])
    dz = _writes(part("bp_inner_x", inputs) + part("bp_inner_h", units))
    assert dz == _writes([s for s in bp if s.result.name == "dz"])
    assert _writes(part("bp_outer", units)) == _writes(
        [s for s in bp if s.result.name in ("dw_cell", "dw", "db")])
    # MS1: BP-EW-P1 moves from bp_ew to fw_ew
    moved = _writes(part("fw_ew", units, ms1=True))
    assert "p_o" in moved and "p_o" not in _writes(part("bp_ew", units, ms1=True))


def test_unknown_part():
    with pytest.raises(ValueError, match=r"^part must be one of fw_mm, fw_ew, bp_ew, "
                                         r"bp_inner_x, bp_inner_h, bp_outer, not 'bp_mm'$"):
        tile_steps(CHANNEL, "bp_mm", 0, 1)
