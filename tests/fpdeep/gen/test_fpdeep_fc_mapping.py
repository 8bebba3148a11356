"""The mapper's FC engine model (nnrtl.gen.fpdeep.mapper, ``fc_model="engine"``): AlexNet on
15 VC709s at fc_batch 4, the FC layers' DDR traffic 3 words per weight (the segments'
model: 4) and the FC engines' cycles a sample a period bound named ``fc``, computed here by
hand from the segments' MAC units; the option's refusal. The default (``segments``)
mapping is unchanged: the other mapper tests pin it."""

import math

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep.hooks import _options
from nnrtl.gen.fpdeep.mapper import map_network
from nnrtl.gen.fpdeep.network import builtin


def engine_cycles_per_sample(n_in, n_out, units, batch):
    """The FC engine's mini-batch by hand: P = units // 3 lanes, K = ceil((n_in + 1) / P)
    beats; load and drain B·n_in each, two passes of n_out·K·B items, 3 cycles of
    pipeline (fixed16: the product register and the δx write)."""
    p = units // 3
    beats = math.ceil((n_in + 1) / p)
    return (2 * batch * n_in + 2 * n_out * beats * batch + 3) / batch


def test_alexnet_fc_engine_bound():
    chain, board = builtin("alexnet"), get_board("vc709")
    segments = map_network(chain, 15, board, fc_batch=4, check_storage=False)
    engine = map_network(chain, 15, board, fc_batch=4, check_storage=False, fc_model="engine")
    assert segments.fc_period == 0 and segments.bound == "ddr"
    assert abs(engine.ddr_period - segments.ddr_period * 3 / 4) <= 1
    fcs = [c for node in engine.nodes for c in node.segments if c.kind == "fc"]
    assert [c.layer for c in fcs] == ["fc6", "fc7", "fc8"]
    want = max(math.ceil(engine_cycles_per_sample(c.n_in, c.n_out, c.mac_units, 4))
               for c in fcs)
    assert engine.fc_period == want
    assert engine.period == want and engine.bound == "fc"
    summary = engine.as_json()["summary"]
    assert (summary["fc_model"], summary["fc_period_cycles"], summary["bound"]) == \
        ("engine", want, "fc")


def test_fc_model_refused():
    with pytest.raises(UsageError, match=r"^--param fc_model must be segments or engine, "
                                         r"not 'gpu'$"):
        _options(["fc_model=gpu"])
    with pytest.raises(UsageError, match=r"^fc_model must be one of segments, engine, not "
                                         r"'gpu'$"):
        map_network(builtin("alexnet"), 15, get_board("vc709"), fc_model="gpu")
