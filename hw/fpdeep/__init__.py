"""FPDeep node RTL (Wang et al., CNN training on a 1-D chain of FPGAs; spec §3), generated per
node from the mapper's configuration (:class:`nnrtl.gen.fpdeep.config.SegmentConfig` →
:class:`.config.FpConfig`).

Built (part 1, issue 14)
------------------------
* :mod:`.line_buffer`: the multi-bank line buffer (K×K windows, padding, stride);
* :mod:`.conv`: the CE array builder (tiles of K×K MACs, the fixed adder-tree order);
* :mod:`.lpram`: the local parameter RAM (Q·K² banks of rows of P words, a row per group and pass; a bias bank);
* :mod:`.fp`: the FP module: LB → CEs → chained partial add → bias → SFU (ReLU, max-pool,
  ReLU mask and argmax) or partials downstream;
* :mod:`.pipe`: the elastic-stage plumbing;
* :mod:`.link`, :mod:`.link_config`: the neighbour-link module of a node side (the six
  datapaths in typed flits over an AXI4-Stream link, round robin, credits per path).

Built (part 2, issue 14: EB and PG)
-----------------------------------
* :mod:`.eb`: the EB module (Q CEs of P tiles over a δ line buffer padded by K−1−pad,
  the rotated kernels from the LPRAM's second read port ``eb_*`` at the rows ``g·passes +
  r``, groups summed per input channel, the OCP partial errors in / out, the δ map dilated
  for stride > 1, fixed16 and fp32) and :class:`.eb.SfuBackward` (unpool from the argmax + ReLU' from
  the mask, overlapping pools summed, PyTorch's max_pool2d backward);
* :mod:`.pg`: the PG module (the K×K small convolutions, P·Q·K² MACs into the LGB in the
  LPRAM's row layout, passes for Q < S_IC, bias gradient, the LGB drained per
  mini-batch), fixed16 and fp32.

Built (part 3, issue 14: update and node)
-----------------------------------------
* :mod:`.update`: the weight update (SGD from the PG drain through the LPRAM ``load`` port);
* :mod:`.segment`: what FP, EB and PG share (configuration, MAC count, the LPRAM read port
  own or shared);
* :mod:`.node`: :class:`.node.SegmentUnit` (FP, EB, PG, update, LPRAM, Act-RAM, mask
  buffer, the update window) and the node top :class:`.node.FpdeepNode` (registers and
  every segment's neighbour streams), configured by :class:`.node.NodeConfig`.

Plan for EB, PG, weight update and links (part 2)
-------------------------------------------------
* **LPRAM sharing**: :class:`.lpram.Lpram` gets a second read port ``eb_addr``/``eb_en``/
  ``eb_data`` on the same banks (FP and EB read different rows concurrently, spec §3.3); EB's
  CE ``i`` (one per input channel) takes bank ``(i, ky, kx)`` at tile position ``(K−1−ky,
  K−1−kx)`` (the rotation by wiring), P tiles for the P output channels of a row. The
  ``load`` port stays the only writer: the weight update writes the new rows through it
  once per mini-batch from the LGB (same bank/row layout), FP and EB stalled (spec §3.8).
* **CE sharing**: EB and PG call :func:`.conv.ce_array` with their own operand wiring
  (``operands[lane][tile][tap]``) and get the same summation order, stage groups and
  precision handling; EB's δ windows come from a second :class:`.line_buffer.LineBuffer`
  (pad ``K−1``, full convolution) over the δ map, PG's activation windows from a third one
  over the Act-RAM stream (``groups`` = 1) with δ broadcast as the "weights".
* **SFU masks**: the ``out`` stream's ``relu``/``argmax`` fields go with the activations to
  the node's Act-RAM-side mask buffer (FIFO in raster order, like the Act-RAM, spec §3.3);
  EB of the next layer's node applies unpool + ReLU' from it.
* **Links**: ``act_in`` (DP1), ``part_in``/``part_out`` (DP2) are the FP's ends of the
  upstream/downstream link pair; the link module serializes ``P``-word beats to link
  words and tags them (spec §3.2's typed flits).
"""

from .config import FpConfig, PARTIAL_BITS, PRECISIONS
from .conv import ce_array, ce_latency
from .eb import EbModule, SfuBackward, error_layout, partial_error_layout
from .fp import FpModule, out_layout, partial_layout
from .line_buffer import LineBuffer, pixel_layout, window_layout
from .link import LinkModule
from .link_config import LinkConfig
from .lpram import Lpram, load_layout, row_layout
from .node import FpdeepNode, NodeConfig, SegmentUnit
from .pg import PgModule, gradient_layout
from .update import WeightUpdate

__all__ = ["FpConfig", "PARTIAL_BITS", "PRECISIONS", "ce_array", "ce_latency", "FpModule",
           "out_layout", "partial_layout", "LineBuffer", "pixel_layout", "window_layout",
           "Lpram", "load_layout", "row_layout", "EbModule", "SfuBackward", "error_layout",
           "partial_error_layout", "PgModule", "gradient_layout", "LinkModule", "LinkConfig",
           "WeightUpdate", "FpdeepNode", "NodeConfig", "SegmentUnit"]
