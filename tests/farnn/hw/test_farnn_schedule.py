# amaranth: UnusedElaboratable=no
"""The schedule's cycle model (:func:`nnrtl.hw.farnn.schedule.run_cycles`) against the
``cycles`` counter of :class:`~nnrtl.hw.farnn.engine.FarnnEngine` measured in the Amaranth
simulator on gapless FW and BW runs: four and eight chains, where the serializer holds the
units' result streams (odd sizes, S = 1 to 3, split 1/2/4, batch 1 and 2, LSTM and GRU),
and a few two-chain runs whose chain heads clash (a short split stream right after a long
one with one adder stage), where the two-chain rule the model had before it missed the
heads' two cycles between beats.

The measured values are the record of ``tests/farnn/hw/test_farnn_engine.py``'s ``check``
(every output bit-exact against the golden model) on these configurations; the slow test
measures them again (some 20-100 s each)."""

import pytest

from nnrtl.hw.farnn import FarnnConfig
from nnrtl.hw.farnn.schedule import run_cycles, serialized_run_cycles


def _config(cell, hidden, *, steps, batch, chains, length, split, **stages):
    return FarnnConfig(cell=cell, input_size=3, hidden_size=hidden, seq_len=steps,
                       batch=batch, chains=chains, chain_length=length, split=split,
                       layers=1, **stages)


#: name: (configuration, measured FW and BW ``cycles``)
SERIALIZED = {
    "lstm-c4-split-b2": (_config("lstm", 9, steps=3, batch=2, chains=4, length=2,
                                 split=2), (320, 297)),
    "gru-c4-shallow": (_config("gru", 7, steps=2, batch=1, chains=4, length=1, split=1,
                               adder_stages=2, multiplier_stages=1), (91, 57)),
    "lstm-c4-s1-b1": (_config("lstm", 7, steps=3, batch=1, chains=4, length=2, split=1),
                      (201, 204)),
    "gru-c4-s1-b2": (_config("gru", 5, steps=3, batch=2, chains=4, length=2, split=1),
                     (221, 160)),
    "gru-c4-s3-split": (_config("gru", 10, steps=3, batch=1, chains=4, length=1, split=2),
                        (322, 224)),
    "lstm-c4-l3-s2": (_config("lstm", 13, steps=3, batch=1, chains=4, length=3, split=1),
                      (259, 245)),
    "lstm-c4-s2-b2-split4": (_config("lstm", 9, steps=2, batch=2, chains=4, length=2,
                                     split=4), (259, 209)),
    "gru-c8-s2-split2": (_config("gru", 11, steps=2, batch=1, chains=8, length=1, split=2),
                         (181, 114)),
}

#: Issue 12: a split factor of 4 or 8 with a split last round whose beats the serializer
#: holds: the fold's ``s - 1`` adders each hold on their own (the model before took them
#: as one pipeline holding as a whole and gave 203/169 and 430/291: too high on every
#: step with an MVM run, as it was 10 a step on the ``vu9p-lstm1024`` preset).
FOLD_ADDERS = {
    "lstm-c8-split4-l2": (_config("lstm", 19, steps=2, batch=1, chains=8, length=2,
                                  split=4), (196, 165)),
    "lstm-c8-split8-l3": (_config("lstm", 51, steps=2, batch=1, chains=8, length=3,
                                  split=8), (418, 285)),
}

#: Two chains (or one), heads clashing: measured (the former two-chain rule, which omitted
#: the head's two cycles between beats of consecutive streams, gave 112/97, 40/25, 80/58).
HEAD_CLASH = {
    "lstm-c2-headclash": (_config("lstm", 12, steps=3, batch=1, chains=2, length=4,
                                  split=2, adder_stages=1, multiplier_stages=1),
                          (118, 101)),
    "gru-c1-headclash": (_config("gru", 3, steps=2, batch=1, chains=1, length=2, split=1,
                                 adder_stages=1, multiplier_stages=0), (41, 25)),
    "gru-c2-l3-split-a1": (_config("gru", 8, steps=3, batch=1, chains=2, length=3,
                                   split=2, adder_stages=1, multiplier_stages=0),
                           (86, 62)),
}


@pytest.mark.parametrize("name", SERIALIZED)
def test_run_cycles_with_the_serializer_holding_the_units(name):
    config, measured = SERIALIZED[name]
    assert config.chains > 2
    for phase, cycles in zip(("fw", "bw"), measured):
        assert run_cycles(config, phase, config.seq_len) == cycles, phase
        assert serialized_run_cycles(config, phase, config.seq_len) == cycles, phase


@pytest.mark.parametrize("name", FOLD_ADDERS)
def test_run_cycles_with_the_fold_adders_holding_one_by_one(name):
    config, measured = FOLD_ADDERS[name]
    assert config.matrix("recurrent").split_last and config.split_factor >= 4
    for phase, cycles in zip(("fw", "bw"), measured):
        assert run_cycles(config, phase, config.seq_len) == cycles, phase


def test_run_cycles_of_the_full_size_preset():
    """``vu9p-lstm1024``, two steps, measured under Verilator (gapless, back-door weight
    load; issue 12): FW 14,923 and BW 7,537 cycles."""
    config = FarnnConfig(cell="lstm", input_size=1024, hidden_size=1024, layers=5, batch=1,
                         chain_length=9, chains=16, weight_depth=8192, split=8,
                         adder_stages=4, multiplier_stages=3)
    assert run_cycles(config, "fw", 2) == 14923
    assert run_cycles(config, "bw", 2) == 7537


@pytest.mark.parametrize("name", HEAD_CLASH)
def test_clashing_chain_heads(name):
    config, measured = HEAD_CLASH[name]
    for phase, cycles in zip(("fw", "bw"), measured):
        assert run_cycles(config, phase, config.seq_len) == cycles, phase


def test_serialized_model_agrees_on_the_engine_tests_two_chain_runs():
    """The configurations of ``tests/farnn/hw/test_farnn_engine.py`` with two chains: measured
    there (``MEASURED``)."""
    measured = {
        (5, 2, 4, 1, 2, "lstm"): (209, 214), (7, 2, 2, 1, 1, "lstm"): (241, 231),
        (5, 2, 2, 2, 2, "lstm"): (296, 275), (5, 2, 2, 2, 2, "gru"): (308, 221),
        (7, 2, 4, 1, 1, "gru"): (213, 150),
    }
    for (hidden, chains, length, split, batch, cell), cycles in measured.items():
        config = _config(cell, hidden, steps=3, batch=batch, chains=chains, length=length,
                         split=split)
        for phase, value in zip(("fw", "bw"), cycles):
            assert run_cycles(config, phase, 3) == value


def _measure(name):
    """Simulate the engine again: every output bit-exact; returns the gapless FW and BW
    ``cycles``."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "farnn_engine_bench", Path(__file__).with_name("test_farnn_engine.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    config, measured = (SERIALIZED | HEAD_CLASH | FOLD_ADDERS)[name]
    # the wait budget covers both loads and both runs of the bigger configurations
    bench.TIMEOUT = max(bench.TIMEOUT, 8 * sum(measured))
    counters = bench.check(config, seed=len(name))
    return counters["fw"]["cycles"], counters["bw"]["cycles"]


def test_the_split4_fold_cycles_are_the_engines():
    """Issue 12 pinned against the RTL in the fast suite (some 35 s): the engine's
    three fold adders holding one by one, every output bit-exact."""
    assert _measure("lstm-c8-split4-l2") == FOLD_ADDERS["lstm-c8-split4-l2"][1]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SERIALIZED) + sorted(HEAD_CLASH)
                         + sorted(FOLD_ADDERS))
def test_measured_cycles_are_the_engines(name):
    """Simulate the engine again: the gapless ``cycles`` the recorded ones."""
    assert _measure(name) == (SERIALIZED | HEAD_CLASH | FOLD_ADDERS)[name][1]
