"""FPDeep node RTL (Wang et al., CNN training on a 1-D chain of FPGAs; spec §3), generated per
node from the mapper's configuration (:class:`nnrtl.gen.fpdeep.config.SegmentConfig` →
:class:`.config.FpConfig`).

* :mod:`.line_buffer`: the multi-bank line buffer (K×K windows, padding, stride);
* :mod:`.conv`: the CE array builder (tiles of K×K MACs, the fixed adder-tree order); EB
  and PG call :func:`.conv.ce_array` with their own operand wiring and get the same
  summation order, stage groups and precision handling;
* :mod:`.lpram`: the local parameter RAM (Q·K² banks of rows of P words, a row per group
  and pass; a bias bank), with a second read port for EB (FP and EB read different rows
  concurrently, spec §3.3); its ``load`` port is the only writer: the weight update
  writes the new rows through it once per mini-batch, FP and EB stalled (spec §3.8);
* :mod:`.fp`: the FP module: LB → CEs → chained partial add → bias → SFU (ReLU, max-pool,
  ReLU mask and argmax) or partials downstream; the masks go with the activations to the
  node's mask buffer (raster order, like the Act-RAM), read by EB of the next layer;
* :mod:`.eb`: the EB module (Q CEs of P tiles over a δ line buffer padded by K−1−pad,
  the rotated kernels from the LPRAM's second read port, groups summed per input
  channel, the OCP partial errors in / out, the δ map dilated for stride > 1, fixed16 and
  fp32) and :class:`.eb.SfuBackward` (unpool from the argmax + ReLU' from the mask,
  overlapping pools summed, PyTorch's max_pool2d backward);
* :mod:`.pg`: the PG module (the K×K small convolutions, P·Q·K² MACs into the LGB in the
  LPRAM's row layout, passes for Q < S_IC, bias gradient, the LGB drained per
  mini-batch), fixed16 and fp32;
* :mod:`.update`: the weight update (SGD from the PG drain through the LPRAM ``load`` port);
* :mod:`.segment`: what FP, EB and PG share (configuration, MAC count, the LPRAM read port
  own or shared);
* :mod:`.node`: :class:`.node.SegmentUnit` (FP, EB, PG, update, LPRAM, Act-RAM, mask
  buffer, the update window) and the node top :class:`.node.FpdeepNode` (registers and
  every segment's neighbour streams), configured by :class:`.node.FpdeepConfig`;
* :mod:`.pipe`: the elastic-stage plumbing;
* :mod:`.link`, :mod:`.link_config`: the neighbour-link module of a node side (the six
  datapaths in typed flits over an AXI4-Stream link, round robin, credits per path).
"""

from .config import FpConfig, PARTIAL_BITS, PRECISIONS
from .conv import ce_array, ce_latency
from .eb import EbModule, SfuBackward, error_layout, partial_error_layout
from .fp import FpModule, out_layout, partial_layout
from .line_buffer import LineBuffer, pixel_layout, window_layout
from .link import LinkModule
from .link_config import LinkConfig
from .lpram import Lpram, load_layout, row_layout
from .node import FpdeepNode, FpdeepConfig, SegmentUnit
from .pg import PgModule, gradient_layout
from .update import WeightUpdate

__all__ = ["FpConfig", "PARTIAL_BITS", "PRECISIONS", "ce_array", "ce_latency", "FpModule",
           "out_layout", "partial_layout", "LineBuffer", "pixel_layout", "window_layout",
           "Lpram", "load_layout", "row_layout", "EbModule", "SfuBackward", "error_layout",
           "partial_error_layout", "PgModule", "gradient_layout", "LinkModule", "LinkConfig",
           "WeightUpdate", "FpdeepNode", "FpdeepConfig", "SegmentUnit"]
