"""Resource model of one FPDeep node (:class:`nnrtl.hw.fpdeep.node.FpdeepConfig`), the
engine's ``resources`` hook (checked against a board by :func:`nnrtl.gen.engines.check_fit`).

* **DSP**: the node's MAC units (:attr:`FpdeepConfig.macs`: FP, PG and EB of every segment)
  times the precision's cost (fixed16 one DSP48E1; fp32 the segment's MAC variant,
  :data:`.cost.FP32_VARIANTS`: 2 to 8).
* **LUT**: the LUT-RAM, the logic of every unit the RTL builds (:func:`logic`,
  :data:`LOGIC`) and, fp32, the MACs' LUTs (its variant's, 626 to 890 each). Per
  segment, in its parameters (``K``, ``P``, ``Q``, ``S_IC`` = ``n_in``, ``w`` the word
  bits, ``passes``, ``B`` the LGB banks, ``L`` the LGB word bits)::

      line buffers   Σ (0.678 · 2(K − 1) · K² · C · w + 144), C = S_IC (FP, PG), P (EB)
      MAC tiles      (1 + EB) · P · Q · 0.971 · tile-tree bits(K²)             (fixed16)
      LGB groups     (2 + 1.019 in block RAM) · B · P · L             (fixed16)
      FP module      0.971 · P · CE-tree bits(Q) + 0.626 · (passes − 1) · Q·K²·w + 65
      PG module      0.409 · B · P · L (drain) + 0.529 · (passes − 1) · Q·K²·w + 139
      EB module      63.6 · S_IC + 21.5 · Q + 0.971 · Q · CE-tree bits(P)   (fixed16)
      update         0.429 · (Q·K² + 1) · P · w (bank select) + 193 · P
      LPRAM          1.03 · (Q·K² + 1)
      Act-RAM        0.334 · S_IC·w · deep (read multiplexer, when > 1 deep) + 35
      SFU            283.5 · P on the completing segment (bias, ReLU, pool, masks)
      control        137 a segment + 254 a node

  LUT-RAM: a memory of fewer than :data:`LUTRAM_BITS` bits or at most
  :data:`LUTRAM_DEPTH` deep (the line buffers of wide pixels) takes 0 BRAM and Yosys'
  RAM64M (64 rows of 3 bits, 4 LUT) per 64 rows, RAM32M (32 rows of 6 bits) for a rest
  of at most 32 (the FP and PG line buffers' 9 banks of 5 × 2,016 bits: 12,096 LUT each).
* **BRAM36**: every memory the node builds, as the RTL sizes it (:func:`memories`).

Against Yosys (``nnrtl synth --hierarchy per-module`` of the generated node,
``synth_xilinx -family xc7``): :data:`SYNTH_FIGURES`, the fitted nodes and a hold-out
node fitted on nothing, checked by ``tests/fpdeep/gen/test_fpdeep_resources.py``. With the
logic counted, the model's ``"lut"`` is a fit test: :func:`~nnrtl.gen.engines.check_fit`'s
0.7 of the device leaves 30 % for routing and packing, not for uncounted logic; the
``vc709-alexnet`` preset fits the VC709 by the model and by Yosys, its single-pass shape
(:func:`~nnrtl.gen.fpdeep.engine.vc709_alexnet_node`) does not.
"""

import collections
import math

from ...hw.fpdeep.conv import tree_levels
from ...hw.fpdeep.lpram import pack
from ...hw.fpdeep.pg import lgb_bits
from .cost import COST_MODELS, fp32_model

__all__ = ["resources", "memories", "logic", "LOGIC", "LUTRAM_BITS", "LUTRAM_DEPTH", "SHAPES",
           "SYNTH_FIGURES"]

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


def _tiling(depth, width):
    """``(BRAM36, primitives deep)`` of the cheapest tiling by one shape (0, 0 in LUTRAM)."""
    if _lutram(depth, width):
        return 0, 0
    return min((math.ceil(width / w) * math.ceil(depth / d) * cost, math.ceil(depth / d))
               for d, w, cost in SHAPES)


def _bram36(depth, width):
    return _tiling(depth, width)[0]


def _luts(depth, width):
    """LUT-RAM LUTs of a memory, as Yosys maps a simple dual-port one: RAM64M (64 rows of 3
    bits, 4 LUTs) per 64 rows, RAM32M (32 rows of 6 bits, 4 LUTs) for a rest of ≤ 32."""
    if not _lutram(depth, width):
        return 0
    full, rest = divmod(depth, 64)
    return 4 * (full * math.ceil(width / 3) + (0 if not rest else math.ceil(width / 6)
                                               if rest <= 32 else math.ceil(width / 3)))


def _packed(name, groups, depth, bank_bits, copies=None):
    """Entries of the packed memories ``groups`` (:func:`~nnrtl.hw.fpdeep.lpram.pack`), each
    built ``copies[i]`` times (default once), alike ones counted together."""
    counts = collections.Counter(
        (len(group), 1 if copies is None else copies[i]) for i, group in enumerate(groups))
    return [(name, count * times, depth, size * bank_bits)
            for (size, times), count in sorted(counts.items(), reverse=True)]


def memories(config):
    """``[(name, count, depth, width)]``: every memory of the node.

    Notes
    -----
    Every memory the node builds, as the RTL sizes it: per segment the LPRAM
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
    (``act_images·out_beats`` entries of ``P·(1 + argmax bits)`` bits). A memory not in
    LUT-RAM takes the cheapest tiling by one primitive shape
    (:data:`SHAPES`: RAMB36E1 512 × 72 … 32K × 1, RAMB18E1 512 × 36 … 16K × 1 as half a
    BRAM36), the choice Yosys' ``memory_libmap`` makes for one memory (checked against
    ``nnrtl synth`` in ``tests/fpdeep/gen/test_fpdeep_resources.py``). Memories are as the RTL
    builds them: no two share a primitive.
    """
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


#: Logic LUTs of the units (the module docstring's formulas and where each coefficient was
#: measured): a line buffer's window bit per way past the first of its two ``K``-way
#: rotations, and its control; an LGB bit (add and write multiplexer; the block RAM's
#: transparent-read bypass); an adder bit of a tile tree past its first level or of a CE
#: tree; the FP and PG modules' pass-multiplexer bit per way past the first, and their
#: control; an input bit of the PG drain's, the update's and the Act-RAM's multiplexers;
#: EB per input channel and per CE; the update per lane; the LPRAM per bank; the SFU per
#: lane; the control per segment and per node.
LOGIC = {
    "window_way": 0.678, "line_buffer": 144,
    "lgb_bit": 2.0, "lgb_bypass_bit": 1087 / (9 * 40) - 2.0,
    "tree_bit": 135 / 139,
    "fp_pass_way": 0.626, "fp": 65,
    "pg_pass_way": 0.529, "pg": 139, "pg_drain_bit": 0.409,
    "eb_channel": 63.6, "eb_ce": 21.5,
    "update_bit": 0.429, "update_lane": 193,
    "act_ram_bit": 0.334, "act_ram": 35,
    "lpram_bank": 1.03,
    "segment": 137, "node": 254, "sfu_lane": 567 / 2,
}


def _tree_bits(items, width, skip=0):
    """Adder bits of a :func:`~nnrtl.hw.fpdeep.conv.tree_levels` reduction of ``items``
    values of ``width`` bits (level ``l``'s adds ``width + l`` bits), past ``skip`` levels."""
    bits, level = 0, 0
    while items > 1:
        level += 1
        if level > skip:
            bits += items // 2 * (width + level)
        items = (items + 1) // 2
    return bits


def logic(config):
    """``{unit: LUTs}``: the logic LUTs of the node's units (the formulas: module docstring),
    fixed16's adds only for fixed16 (fp32's are in the per-MAC cost,
    :data:`.cost.COST_MODELS`).

    Notes
    -----
    A tile tree's bits are those of its adds past the first level (``tap`` products of
    ``2w`` bits, level ``l`` adds ``2w + l`` bits; the first level goes into the DSP48E1s'
    post-adders), a CE tree's those of all its levels over the tile sums. Each coefficient
    is Yosys' count of that unit divided by what it scales with, from per-module runs of
    the nodes of :data:`SYNTH_FIGURES` and single-unit runs; the ``passes``-way
    multiplexers are taken linear in the ways past the first; fp32's logic other than the
    multiplexers, the update's select and the control is left to the per-MAC cost.
    """
    c = LOGIC
    fixed = config.precision == "fixed16"
    found = collections.Counter({"control": c["node"]})
    for n, (cfg, eb) in enumerate(zip(config.segments, config.eb)):
        word, taps, k, p, q, passes = (cfg.word_bits, cfg.taps, cfg.k, cfg.p, cfg.q,
                                       cfg.passes)
        words = (cfg.n_in, cfg.n_in) + ((p,) if eb else ())    # FP, PG, EB pixels
        found["line_buffers"] += sum(
            c["window_way"] * 2 * (k - 1) * taps * pixel * word + c["line_buffer"]
            for pixel in words)
        tile_bits = q * taps * word * (passes - 1)              # the pass multiplexers
        found["fp"] += c["fp"] + c["fp_pass_way"] * tile_bits
        found["pg"] += c["pg"] + c["pg_pass_way"] * tile_bits + c["pg_drain_bit"] * (
            (cfg.banks + int(cfg.completes)) * p * lgb_bits(cfg, config.batch))
        found["update"] += (c["update_bit"] * (cfg.banks + 1) * p * word
                            + c["update_lane"] * p)
        found["lpram"] += c["lpram_bank"] * (cfg.banks + 1)
        deep = _tiling(config.act_images * cfg.w_in ** 2, cfg.n_in * word)[1]
        found["act_ram"] += c["act_ram"] + (
            c["act_ram_bit"] * deep * cfg.n_in * word if deep > 1 else 0)
        found["control"] += c["segment"]
        if cfg.completes:
            found["sfu"] += c["sfu_lane"] * p
        if not fixed:
            continue
        sum_bits = 2 * word + tree_levels(taps)            # MacTile.sum
        found["mac_tiles"] += (1 + eb) * p * q * c["tree_bit"] * _tree_bits(taps, 2 * word, 1)
        found["fp"] += c["tree_bit"] * p * _tree_bits(q, sum_bits)
        found["lgb"] += sum(count * width * (c["lgb_bit"] + c["lgb_bypass_bit"] * (
            not _lutram(depth, width))) for name, count, depth, width in memories(config)
            if name == f"s{n}.lgb")
        if eb:
            found["eb"] += (c["eb_channel"] * cfg.n_in + c["eb_ce"] * q
                            + c["tree_bit"] * q * _tree_bits(p, sum_bits))
    return {unit: round(luts) for unit, luts in sorted(found.items())}


def resources(config, family=None):
    """``{"dsp", "lut", "bram36"}`` of ``config`` (module docstring): ``"lut"`` the MACs'
    (fp32), the LUT-RAM and the units' logic (:func:`logic`); ``family`` (the board's Yosys
    family) does not change the model."""
    found = memories(config)
    dsp = lut = 0
    for cfg, eb in zip(config.segments, config.eb):
        model = (fp32_model(cfg.multiplier_shifts, cfg.adder_shifts)
                 if config.precision == "fp32" else COST_MODELS[config.precision])
        dsp += cfg.macs * (2 + eb) * model.dsp_per_mac
        lut += cfg.macs * (2 + eb) * model.lut_per_mac
    return {
        "dsp": dsp,
        "lut": lut + sum(
            count * _luts(depth, width) for _, count, depth, width in found)
        + sum(logic(config).values()),
        "bram36": math.ceil(sum(count * _bram36(depth, width)
                                for _, count, depth, width in found)),
    }
