# amaranth: UnusedElaboratable=no
"""One PE control driving Omni-PE lanes (Amaranth simulator): two lanes in lockstep, one
on the operands the golden model gets, the other on different data (as a channel's
inactive lanes run on don't-care words): the first's results are the model's bit for
bit under gaps and backpressure, whatever the other computes. The whole PE (control and
lane) is tests/omni/hw/test_omni_pe.py's; a channel of them tests/omni/hw/test_omni_channel.py's.
"""

import zlib

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring

from nnrtl.hw.omni import OmniPEConfig
from nnrtl.hw.omni.config import ConfiguredComponent
from nnrtl.hw.omni.lane import OmniLane
from nnrtl.hw.omni.pe_control import OmniPEControl
from nnrtl.sim.tb.omni.pe import PATTERNS, check_in_amaranth, random_jobs, random_operands


class TwoLanes(ConfiguredComponent):
    """A PE's ports over one control and two lanes: lane ``shown`` gets the operands
    and drives ``o``; the other gets them with every bit of ``scramble`` flipped."""

    CONFIG = OmniPEConfig

    def __init__(self, config, *, shown, scramble):
        self.shown = shown
        self.scramble = scramble
        super().__init__(config)

    def elaborate(self, platform):
        m = Module()
        m.submodules.control = control = OmniPEControl(self.config)
        lanes = [OmniLane(self.config) for _ in range(2)]
        for index, lane in enumerate(lanes):
            m.submodules[f"lane_{index}"] = lane
            flip = 0 if index == self.shown else self.scramble
            m.d.comb += [lane.i_control.eq(control.o_control),
                         lane.i_input1.eq(self.i_input1.payload ^ flip),
                         lane.i_input2.eq(self.i_input2.payload ^ flip)]
        m.d.comb += [
            control.i_input1.valid.eq(self.i_input1.valid),
            self.i_input1.ready.eq(control.i_input1.ready),
            control.i_input2.valid.eq(self.i_input2.valid),
            self.i_input2.ready.eq(control.i_input2.ready),
            self.o.valid.eq(control.o.valid),
            self.o.payload.data.eq(lanes[self.shown].o_data),
            self.o.payload.last.eq(control.o.payload),
            control.o.ready.eq(self.o.ready),
        ]
        wiring.connect(m, wiring.flipped(self.i_command), control.i_command)
        return m


@pytest.mark.parametrize("shown", [0, 1])
def test_a_lane_is_exact_beside_a_lane_on_other_data(shown):
    """Random modes and lengths from 1 back to back; the other lane's operands differ in
    sign and low bits (their sums, products and specials differ)."""
    config = OmniPEConfig(max_length=32)
    seed = zlib.crc32(f"two lanes {shown}".encode())
    rng = np.random.default_rng(seed)
    jobs = random_jobs(rng, 12, max_length=20)
    input1, input2 = random_operands(config.fmt, rng, jobs)
    pe = TwoLanes(config, shown=shown, scramble=config.fmt.sign_mask | 0x5A5)
    check_in_amaranth(pe, jobs, input1, input2, seed=seed, patterns=PATTERNS[::3])


def test_validation():
    with pytest.raises(TypeError, match=r"^config must be an OmniPEConfig, not 'pe'$"):
        OmniPEControl("pe")
