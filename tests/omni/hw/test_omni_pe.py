# amaranth: UnusedElaboratable=no
"""Omni-PE (Amaranth simulator): every mode against the golden model bit for bit, random
job mixes with lengths from 1 (odd and even), modes switched back to back, input gaps and
output backpressure; the cycles of gapless runs against the configuration's timing
(``output_cycles``: ``cycles``, ``switch_cycles``, ``result_offset``); the checks.
A random mix under the four backpressure patterns runs under Verilator
(``tests/omni/sim/test_omni_pe_verilator.py``).
"""

import itertools
import re
import zlib

import numpy as np
import pytest

from nnrtl.hw.arith.float import BF16, FP32, FloatFormat
from nnrtl.hw.omni import OmniJob, OmniMode, OmniPE, OmniPEConfig
from nnrtl.sim.tb.omni.pe import PATTERNS, check_in_amaranth, random_jobs, random_operands


CONFIGS = {
    # the paper's adder (the defaults: subnormals flushed, DSP shifts); a shallow adder
    # behind a deep multiplier (the EW-add hold), exact subnormals, LUT shifts; no
    # multiplier registers and a one-stage adder, flushing, bf16, the multiplier's shift
    # in LUTs
    "fp32_a8_m4": OmniPEConfig(max_length=64),
    "fp32_a2_m6": OmniPEConfig(adder_stages=2, multiplier_stages=6, partial_depth=2,
                               input_depth=2, output_depth=2, max_length=64,
                               flush_subnormals=False, adder_shifts="lut",
                               multiplier_shifts="lut"),
    "bf16_a1_m0_flush": OmniPEConfig(fmt=BF16, adder_stages=1, multiplier_stages=0,
                                     flush_subnormals=True, max_length=64,
                                     multiplier_shifts="lut"),
    # the adder's and the multiplier's DSP48E2 slices in their Amaranth behaviour
    "fp32_a8_m4_dsp_behaviour": OmniPEConfig(max_length=64, dsp_primitives="behaviour"),
}


def operands(config, jobs, seed):
    return random_operands(config.fmt, np.random.default_rng(seed), jobs)


def random_mix(name, count, max_length):
    seed = zlib.crc32(name.encode())
    jobs = random_jobs(np.random.default_rng(seed), count, max_length=max_length)
    jobs[1:3] = [OmniJob(OmniMode.EW_ADD, 1, True), OmniJob(OmniMode.MVM, 1)]
    assert {job.mode for job in jobs} == set(OmniMode)
    return jobs, seed


@pytest.mark.parametrize("name", CONFIGS)
def test_random_mix_under_gaps_and_backpressure(name):
    """Random modes and lengths (1 to 30) back to back: bit-exact with gaps, with
    backpressure and with both."""
    config = CONFIGS[name]
    jobs, seed = random_mix(name, 14, 30)
    check_in_amaranth(OmniPE(config), jobs, *operands(config, jobs, seed), seed=seed,
                      patterns=PATTERNS[1:], timed=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", CONFIGS)
def test_long_random_mix(name):
    config = CONFIGS[name]
    jobs, seed = random_mix(name + "long", 80, 64)
    check_in_amaranth(OmniPE(config), jobs, *operands(config, jobs, seed), seed=seed,
                      timed=False)


def one_mode(name, mode, count):
    config = CONFIGS[name]
    seed = zlib.crc32(f"{name}{mode.name}".encode())
    jobs = random_jobs(np.random.default_rng(seed), count, max_length=24, modes=(mode,))
    jobs[0] = OmniJob(mode, 1)
    check_in_amaranth(OmniPE(config), jobs, *operands(config, jobs, seed), seed=seed,
                      patterns=[(0.0, 0.0)])
    if mode is not OmniMode.MVM:
        assert config.output_cycles(jobs)[-1] - config.output_cycles(jobs)[0] == \
            sum(job.length for job in jobs) - 1  # one result per cycle throughout


@pytest.mark.parametrize("mode", list(OmniMode), ids=lambda mode: mode.name)
def test_one_mode_cycles(mode):
    """Jobs of one mode, random lengths from 1, gapless: one element per cycle (one MAC per
    cycle, plus the reduction, for MVM), each result in the cycle ``output_cycles`` says."""
    one_mode("fp32_a8_m4", mode, 6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fp32_a2_m6", "bf16_a1_m0_flush"])
@pytest.mark.parametrize("mode", list(OmniMode), ids=lambda mode: mode.name)
def test_one_mode_cycles_other_configs(name, mode):
    one_mode(name, mode, 12)


@pytest.mark.parametrize("name", ["fp32_a8_m4", "fp32_a2_m6"])
def test_mode_switches(name):
    """Every ordered pair of modes back to back (``a, b, a``) at ``switch_length``: the
    switch costs exactly ``switch_cycles``."""
    config = CONFIGS[name]
    n = config.switch_length
    jobs = []
    for first, second in itertools.product(OmniMode, OmniMode):
        jobs += [OmniJob(first, n), OmniJob(second, n, second is OmniMode.EW_ADD)]
    check_in_amaranth(OmniPE(config), jobs, *operands(config, jobs, 5), seed=5,
                      patterns=[(0.0, 0.0)])


@pytest.mark.slow
def test_paper_accumulation_at_1024():
    """An MVM row of 1024 on the paper's 8-stage adder: ``1024 + E`` cycles per row
    (E = 31), the sum bit-exact; rows back to back."""
    config = OmniPEConfig(max_length=1024)
    jobs = [OmniJob(OmniMode.MVM, 1024), OmniJob(OmniMode.MVM, 1024)]
    [run] = check_in_amaranth(OmniPE(config), jobs, *operands(config, jobs, 9), seed=9,
                              patterns=[(0.0, 0.0)])
    assert config.cycles(jobs[0]) == 1055
    assert run["output"][1] - run["output"][0] == 1055


def test_config_properties():
    config = OmniPEConfig()
    assert (config.fmt, config.adder_stages, config.multiplier_stages) == (FP32, 8, 4)
    assert config.reduction_cycles == 31 and config.fill_cycles == 9
    assert config.job_depth == 4 + 8 + 8 + 4 + 2
    job = OmniJob(OmniMode.OUTER, 5)
    assert (job.inputs1, job.inputs2, job.results, job.uses_adder) == (1, 5, 5, False)
    mvm = OmniJob(OmniMode.MVM, 7)
    assert (mvm.inputs1, mvm.results, mvm.uses_adder, config.cycles(mvm)) == (7, 1, True, 38)
    add = OmniJob(OmniMode.EW_ADD, 3, True)
    assert config.switch_cycles(mvm, add) == 5 and config.switch_cycles(add, job) == 5
    assert config.switch_cycles(add, mvm) == 3 and config.switch_cycles(mvm, job) == 2
    assert config.switch_cycles(job, add) == 0 and config.switch_cycles(job, mvm) == 0
    layout = config.command_layout
    assert [name for name, _ in layout] == ["mode", "length", "subtract"]
    assert layout["length"].width == 13 and config.output_layout.size == 33
    assert OmniPE(config).config is config


@pytest.mark.parametrize("call, error, message", [
    (lambda: OmniPEConfig(fmt="fp32"), TypeError, r"^fmt must be a FloatFormat, not 'fp32'$"),
    (lambda: OmniPEConfig(adder_stages=9), TypeError,
     r"^adder_stages must be an integer from 1 to 8, not 9$"),
    (lambda: OmniPEConfig(adder_stages=0), TypeError,
     r"^adder_stages must be an integer from 1 to 8, not 0$"),
    (lambda: OmniPEConfig(multiplier_stages=7), TypeError,
     r"^multiplier_stages must be an integer from 0 to 6, not 7$"),
    (lambda: OmniPEConfig(input_depth=1), TypeError,
     r"^input_depth must be an integer of at least 2, not 1$"),
    (lambda: OmniPEConfig(output_depth=True), TypeError,
     r"^output_depth must be an integer of at least 2, not True$"),
    (lambda: OmniPEConfig(partial_depth=7), ValueError,
     r"^partial_depth \(7\) cannot be less than adder_stages \(8\): the Partial Output "
     r"Queue must hold every result in flight in the adder$"),
    (lambda: OmniPEConfig(max_length=0), TypeError,
     r"^max_length must be a positive integer, not 0$"),
    (lambda: OmniPEConfig(flush_subnormals=1), TypeError,
     r"^flush_subnormals must be a bool, not 1$"),
    (lambda: OmniPEConfig(adder_shifts="barrel"), ValueError,
     r"^adder_shifts must be 'lut' or 'dsp', not 'barrel'$"),
    (lambda: OmniPEConfig(fmt=FloatFormat(11, 52)), ValueError,
     r"^adder_shifts 'dsp' takes a precision of at most 26 bits, not 53$"),
    (lambda: OmniPEConfig(multiplier_shifts="barrel"), ValueError,
     r"^multiplier_shifts must be 'lut' or 'dsp', not 'barrel'$"),
    (lambda: OmniPEConfig(fmt=FloatFormat(8, 31), adder_shifts="lut"), ValueError,
     r"^multiplier_shifts 'dsp' takes a precision of at most 31 bits, not 32$"),
    (lambda: OmniPEConfig(dsp_primitives="yes"), TypeError,
     r"^dsp_primitives must be False, True or 'behaviour', not 'yes'$"),
    (lambda: OmniPEConfig(dsp_primitives=True, adder_shifts="lut"), ValueError,
     r"^dsp_primitives=True needs adder_shifts='dsp', not adder_shifts='lut'; use "
     r"dsp_primitives=False$"),
    (lambda: OmniJob("mvm", 3), TypeError, r"^mode must be an OmniMode, not 'mvm'$"),
    (lambda: OmniJob(OmniMode.MVM, 0), TypeError, r"^length must be a positive integer, not 0$"),
    (lambda: OmniJob(OmniMode.EW_MUL, 2, True), ValueError,
     r"^subtract is only valid with mode EW_ADD, not EW_MUL$"),
    (lambda: OmniPEConfig(max_length=8).cycles(OmniJob(OmniMode.MVM, 9)), ValueError,
     r"^job length \(9\) cannot exceed max_length \(8\)$"),
    (lambda: OmniPE("pe"), TypeError, r"^config must be an OmniPEConfig, not 'pe'$"),
])
def test_validation(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_dsp_primitives_reach_every_lane_from_the_top():
    """The top's ``dsp_primitives`` is its channels' and their lanes' (the Verilog of a
    lane then instantiates DSP48E2: the adder's alignment slice and the multiplier's two
    cascaded product slices; the other three DSPs stay the tool's)."""
    from nnrtl.hw.omni.lane import OmniLane
    from nnrtl.hw.omni.top_config import OmniConfig
    from nnrtl.sim.runner import to_verilog

    config = OmniConfig(input_size=3, hidden_size=5, channels=2, dsp_primitives=True)
    assert config.channel.dsp_primitives is True and config.channel.pe.dsp_primitives is True
    assert OmniConfig().channel.pe.dsp_primitives is True      # generated designs
    assert OmniPEConfig().dsp_primitives is False               # the units alone
    lane = to_verilog(OmniLane(OmniPEConfig(max_length=8, dsp_primitives=True)), "lane")
    assert len(re.findall(r"^\s*DSP48E2 #\(", lane, re.MULTILINE)) == 3
