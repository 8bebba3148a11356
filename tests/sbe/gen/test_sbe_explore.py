"""Design-space exploration of the SBE."""

import math
import pathlib
import re

import pytest

from nnrtl.boards import Capacity, get_board
from nnrtl.gen.cli import main
from nnrtl.gen.engines import LUT_SHARE, check_fit, get_engine
from nnrtl.gen.errors import UsageError
from nnrtl.gen.sbe.explore import Exploration, explore, format_table
from nnrtl.gen.sbe.exploration import feasible_points
from nnrtl.gen.models import ModelSpec
from nnrtl.gen.sbe.perf import lower_bound_cycles, predict
from nnrtl.gen.sbe.resources import resource_estimate
from nnrtl.hw.sbe import PRESETS

ROOT = pathlib.Path(__file__).resolve().parents[3]


def board(name="tiny", *, dsp=64, bram36=40, gbps=1.6, lut=20_000):
    """A platform-like class with a made-up capacity."""
    capacity = Capacity(lut=lut, ff=2 * lut, dsp=dsp, dsp_kind="DSP48E1", bram36=bram36,
                        uram=0, onchip_mb=round(bram36 * 36 / 1024, 2),
                        offchip_kind="test memory", offchip_gbps=gbps, yosys_family="xc7",
                        sources=("made up for a test",))
    return type(name, (), {"name": name, "capacity": capacity})


def fits(candidate, capacity, lut_share=LUT_SHARE):
    r = candidate.resources
    return (r.dsp <= capacity.dsp and r.bram36 <= capacity.bram36
            and r.luts <= lut_share * capacity.lut)


def test_picks_the_fastest_feasible_design():
    platform = board()
    everything = explore((24, 8, 2), platform, seq_len=24, clock_hz=100e6, top=10 ** 6)
    assert len(everything.candidates) == everything.feasible > 10
    assert all(fits(c, platform.capacity) for c in everything.candidates)
    ranked = everything.candidates
    assert [c.rank_key() for c in ranked] == sorted(c.rank_key() for c in ranked)
    assert ranked[0].cycles == min(c.cycles for c in ranked)
    for c in ranked[:5]:
        assert c.cycles == predict(c.config).cycles
    # Pruning by the lower bound finds the same leaders.
    pruned = explore(ModelSpec(24, 8, 2), platform, seq_len=24, clock_hz=100e6, top=5)
    assert [c.config for c in pruned.candidates] == [c.config for c in ranked[:5]]
    assert pruned.best is pruned.candidates[0]


def test_ties_go_to_fewer_resources():
    result = explore((24, 8, 1), board(), seq_len=16, clock_hz=100e6, top=10 ** 6)
    by_cycles = {}
    for c in result.candidates:
        by_cycles.setdefault(c.cycles, []).append(c)
    tied = [group for group in by_cycles.values() if len(group) > 1]
    assert tied
    for group in tied:
        keys = [(c.resources.dsp, c.resources.bram36) for c in group]
        assert keys == sorted(keys)


def test_bandwidth_bounds_the_bus():
    slow = explore((24, 8, 1), board(gbps=0.8), seq_len=16, clock_hz=100e6, top=10 ** 6)
    # 0.8 GB/s at 100 MHz is 8 bytes a cycle: four 16-bit weights.
    assert max(c.config.bus_weights for c in slow.candidates) == 4


def test_rejects_a_board_nothing_fits():
    with pytest.raises(UsageError, match=r"^no SBE configuration of LSTM 1792x256x1 fits "
                                         r"tiny \(1 BRAM36, 4 DSP\): the smallest needs "
                                         r"\d+ BRAM36 and \d+ DSP$"):
        explore((1792, 256, 1), board(dsp=4, bram36=1), seq_len=64, clock_hz=100e6)
    with pytest.raises(UsageError, match=r"^tiny's off-chip bandwidth \(0\.1 GB/s\) cannot "
                                         r"deliver one 16-bit weight per cycle at 200 MHz$"):
        explore((24, 8, 1), board(gbps=0.1), seq_len=16, clock_hz=200e6)
    with pytest.raises(UsageError, match=r"^unknown board 'nope'"):
        explore((24, 8, 1), "nope", seq_len=16)


@pytest.mark.parametrize("name, clock_hz", [("zc706-lstm256", None),
                                            ("vc709-lstm512", 125e6)])
def test_paper_models_on_their_boards(name, clock_hz):
    preset = PRESETS[name]
    config = preset.config
    result = explore((config.input_size, config.hidden_size, config.layers), preset.board,
                     seq_len=config.seq_len, clock_hz=clock_hz, top=5)
    assert isinstance(result, Exploration)
    capacity = get_board(preset.board).capacity
    assert all(fits(c, capacity) for c in result.candidates)
    # The paper's own design's memories fit the board (its DSPs fit by construction: the
    # preset's LUT multipliers were chosen for that), and the exploration does at least
    # as well.
    assert resource_estimate(config).bram36 <= capacity.bram36
    assert result.best.utilization >= predict(config).utilization
    table = format_table(result)
    assert table.splitlines()[0].startswith(f"SBE on {preset.board} at ")
    assert len(table.splitlines()) == 4 + len(result.candidates)


@pytest.mark.parametrize("lut_share", [0.3, LUT_SHARE])
def test_explore_and_generate_apply_one_rule(lut_share):
    """Every candidate explore keeps passes generate's check with the same share, and the
    candidates it drops for LUTs are those the check refuses; a smaller share keeps
    fewer."""
    platform = board(dsp=40, lut=20_000)
    result = explore((24, 8, 1), platform, seq_len=16, clock_hz=100e6, top=10 ** 6,
                     lut_share=lut_share)
    sbe = get_engine("sbe")
    for candidate in result.candidates:
        assert check_fit(sbe, candidate.config, platform, lut_share=lut_share) == \
            candidate.resources.needs()
    over = [c for c in explore((24, 8, 1), platform, seq_len=16, clock_hz=100e6,
                               top=10 ** 6, lut_share=1.0).candidates
            if c.resources.luts > lut_share * 20_000]
    assert over
    for candidate in over:
        with pytest.raises(UsageError, match=r" lut counted by its resource model, "):
            check_fit(sbe, candidate.config, platform, lut_share=lut_share)


def test_the_documented_example_picks_the_papers_design_size(capsys):
    """LSTM 1792 x 256 on the ZC706 (the SBE page's example, whose output the page shows
    as this prints it): 1024 PEs, as the paper's design, some of them LUT multipliers
    (900 DSPs less 4 PPs' 9 each without batch norm: 160)."""
    readme = (ROOT / "docs" / "engines" / "sbe" / "index.md").read_text()
    command = re.search(r"^nnrtl explore sbe --board zc706 --param input_size=1792 .*$",
                        readme, re.M).group(0)
    shown = re.search(r"^```\n(SBE on zc706 at 200 MHz: LSTM 1792 inputs.*?)^```$", readme,
                      re.M | re.S).group(1)
    assert main(command.split()[1:]) == 0
    out = capsys.readouterr().out
    assert out == shown
    generate = out.splitlines()[-1].split()
    assert {"pes=1024", f"lut_multipliers={1024 - (900 - 4 * 9)}"} <= set(generate)


def test_odd_sizes_are_explored_padded():
    """39 inputs, 19 hidden units: block numbers that do not divide the 58 columns and PE
    counts that do not divide the 76 rows are candidates (the sizes padded); cycles are
    the padded problem's, utilization counts the model's MACs."""
    result = explore((39, 19, 1), board(), seq_len=16, clock_hz=100e6, top=10 ** 6)
    configs = [c.config for c in result.candidates]
    assert any(58 % config.blocks for config in configs)
    assert any(76 % config.pes and config.pes % 76 for config in configs)
    for candidate in result.candidates[:5]:
        prediction = predict(candidate.config)
        assert candidate.cycles == prediction.cycles
        assert prediction.useful_macs == 16 * 4 * 19 * (39 + 19)


def test_every_feasible_configuration_is_kept():
    """``points``: every feasible configuration with its resources, its lower bound and,
    when it was ranked, its exact cycles -- the same set whether or not the ranking stops
    early; those it skipped could not beat the ``top`` best."""
    platform = board()
    everything = explore((24, 8, 2), platform, seq_len=24, clock_hz=100e6, top=10 ** 6)
    pruned = explore((24, 8, 2), platform, seq_len=24, clock_hz=100e6, top=5)
    assert len(everything.points) == everything.feasible == pruned.feasible > 10
    assert [p.config for p in pruned.points] == [p.config for p in everything.points]
    exact = {c.config: c.cycles for c in everything.candidates}
    assert {p.config: p.cycles for p in everything.points} == exact
    ranked = [p for p in pruned.points if p.cycles is not None]
    skipped = [p for p in pruned.points if p.cycles is None]
    assert 5 <= len(ranked) < len(pruned.points) and skipped
    assert all(p.cycles == exact[p.config] for p in ranked)
    assert min(p.lower_bound for p in skipped) > pruned.candidates[-1].cycles
    for point in everything.points:
        assert point.lower_bound == lower_bound_cycles(point.config) <= exact[point.config]
        assert point.resources == resource_estimate(point.config, "xc7")
        assert fits(point, platform.capacity)
    bounds = [(p.lower_bound, p.resources.dsp, p.resources.bram36) for p in pruned.points]
    assert bounds == sorted(bounds)


def test_feasible_points_are_bounded_and_say_how():
    """``explore.json``'s ``feasible_points``: all of them under the limit; beyond it, the
    best ranked (the chosen one first among them) and an even sample of the others."""
    result = explore((24, 8, 2), board(), seq_len=24, clock_hz=100e6, top=5)
    found = feasible_points(result)
    assert (found["count"], found["kept"], found["sampled"]) == (result.feasible,) * 2 + (False,)
    first = result.points[0]
    assert found["points"][0] == {
        "pes": first.config.pes, "batch": first.config.batch, "blocks": first.config.blocks,
        "bus_weights": first.config.bus_weights, "post_units": first.config.post_units,
        "lut_multipliers": first.config.lut_multipliers,
        "lower_bound_cycles": first.lower_bound, "cycles": first.cycles,
        "dsp": first.resources.dsp, "bram36": first.resources.bram36,
        "luts": first.resources.luts}

    ranked = sum(p.cycles is not None for p in result.points)
    limit = 2 * ranked + 10
    assert result.feasible > limit
    sample = feasible_points(result, limit=limit)
    assert (sample["count"], sample["kept"], sample["sampled"]) == (result.feasible, limit,
                                                                    True)
    others = result.feasible - ranked
    assert sample["kept_which"] == (f"the {ranked} best ranked and {limit - ranked} of the "
                                    f"other {others} evenly in order of their lower bound "
                                    f"(one in {others / (limit - ranked):.2f})")
    kept = sample["points"]
    assert sum(p["cycles"] is not None for p in kept) == ranked
    best = result.best
    assert any(p["cycles"] == best.cycles and p["pes"] == best.config.pes
               and p["blocks"] == best.config.blocks and p["batch"] == best.config.batch
               for p in kept)
    bounds = [p["lower_bound_cycles"] for p in kept if p["cycles"] is None]
    assert bounds == sorted(bounds)
    # evenly: the unranked points kept span the whole range of bounds, one in `step`
    unranked = [p.lower_bound for p in result.points if p.cycles is None]
    step = others / (limit - ranked)
    assert bounds[0] == unranked[0]
    assert bounds[-1] >= unranked[others - math.ceil(step) - 1]
