"""Cycle and DDR model of the FC engine (:mod:`nnrtl.hw.fpdeep.fc`), exact for the RTL without
pauses (every stream valid and ready): ``tests/fpdeep/hw/test_fpdeep_fc.py`` and the Verilator
bench (``nnrtl.sim.tb.fpdeep.fc``) hold the RTL's cycles equal to :func:`fc_cycles`.

A mini-batch of ``B`` samples (``N = n_out · K · B`` items a pass, ``L`` the products'
latency, :func:`nnrtl.hw.fpdeep.conv.ce_latency` of one tap)::

    load B·n_in  +  forward N  +  backward N  +  L + 2 (the last δx write)  +  drain B·n_in

the next mini-batch's load starting the cycle after the last drain item issues; the last
mini-batch ends with the drain's output register (``+ 1``) or, when the drain is shorter,
the last new weight beat (fixed16 ``+ 2``, fp32 ``+ 3``).

DDR traffic: ``W⁺`` (``n_out · K · P`` words as stored) read twice and written once a
mini-batch; the engine's input and δx buffers stay on chip.

:func:`segment_engine` is the engine a mapper's FC segment would get from its MAC units
(``3·P`` multipliers: ``P`` forward, ``2·P`` backward) and :func:`per_sample_cycles` its
cycles a sample: the passes run one after the other, so a MAC unit works half of them
(the mapper's FC model runs FP, EB and PG concurrently: about half the engine's cycles).
"""

from nnrtl.hw.fpdeep.conv import ce_latency
from nnrtl.hw.fpdeep.fc_config import FcConfig

__all__ = ["fc_period", "fc_cycles", "fc_ddr_bytes", "segment_engine", "per_sample_cycles",
           "ddr_bytes_per_sample"]


def fc_period(cfg):
    """Cycles from one mini-batch's first input word to the next one's, without pauses."""
    items = cfg.pass_items
    return 2 * cfg.batch * cfg.n_in + 2 * items + ce_latency(cfg, 1, 1) + 2


def fc_cycles(cfg, batches=1):
    """Cycles of ``batches`` mini-batches without pauses: from the first ``i_x`` cycle to
    the last output handshake (the bench's count)."""
    load, items = cfg.batch * cfg.n_in, cfg.pass_items
    update = 3 if cfg.precision == "fp32" else 2
    backward_end = fc_period(cfg) - load + max(load + 1, update)
    forward_end = load + items + ce_latency(cfg, 1, cfg.p) + 2
    return (batches - 1) * fc_period(cfg) + max(backward_end, forward_end)


def fc_ddr_bytes(cfg):
    """DDR bytes a mini-batch moves: ``W⁺`` read twice, written once."""
    return 3 * cfg.weight_words * cfg.word_bits // 8


def segment_engine(segment, precision, batch):
    """The :class:`~nnrtl.hw.fpdeep.fc_config.FcConfig` of an FC ``segment`` (the mapper's
    :class:`~nnrtl.gen.fpdeep.config.SegmentConfig`, or anything with ``n_in``, ``n_out`` and
    ``mac_units``): ``P = mac_units // 3`` lanes (at least 1, at most ``n_in + 1``), the
    mini-batch ``batch`` (the mapping's ``fc_batch``)."""
    lanes = max(1, min(segment.mac_units // 3, segment.n_in + 1))
    return FcConfig(precision=precision, n_in=segment.n_in, n_out=segment.n_out, p=lanes,
                    batch=batch)


def per_sample_cycles(cfg):
    """Cycles a sample of the engine ``cfg`` in a stream of mini-batches:
    :func:`fc_period` over ``B``."""
    return fc_period(cfg) / cfg.batch


def ddr_bytes_per_sample(cfg):
    """DDR bytes a sample: :func:`fc_ddr_bytes` over ``B``."""
    return fc_ddr_bytes(cfg) / cfg.batch

