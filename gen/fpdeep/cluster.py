"""The FPDeep cluster simulator (spec §3.7, §3.8, §4.5): a cycle-level
model of every node of a mapping and of the links between them, on MPI.

::

    python -m nnrtl.gen.fpdeep.cluster --mapping DIR/mapping.json --ranks R [--images K]
        [--param k=v]... [--json] [-o FILE]

``--param`` options (:data:`OPTIONS`): ``link_gbps`` (per link and direction; default the
mapping's, 0 unlimited), ``link_latency`` (cycles, default 100), ``act_ram_samples``,
``inflight``, ``minibatch``, ``timing.<field>`` (:class:`~.cluster_node.NodeTiming`).

(``nnrtl cluster fpdeep ...`` is the same through the engine's ``cluster`` hook.) With
``--ranks`` above 1 it starts its own MPI job (``mpiexec`` of the ``mpich`` wheel); under an
external ``mpirun``/``mpiexec`` it runs on that job's ranks.

Model (:mod:`.cluster_node`, :mod:`.cluster_link`): per node and segment the FP, EB and PG
modules at pixel granularity (a pixel starts when its window has arrived, FP and BP of
different samples overlap), per boundary and direction one link (bandwidth in Gb/s,
latency in cycles) carrying the typed streams of datapaths 1-6. Event times come from
max-plus recurrences (exactly what an event-by-event run of the same servers gives), a
whole sample's pixels at once per module.

Decomposition: rank ``r`` holds a contiguous block of nodes; the only messages are the
stream arrival times crossing a rank boundary, one message per sample and direction (the
sending node owns its link, so the receiver needs nothing else). Synchronization is
conservative and by causality: a rank computes sample ``s`` on its nodes as soon as the
neighbour's message for ``s`` is there, so ranks pipeline over samples and nothing is
ever rolled back. Every node's state depends only on its inputs in sample order, so the
result is bit-identical for any rank count.

Checks (:func:`failures`, ``nnrtl cluster`` and this module exit 1 after printing the
result): an Act-RAM or PAB peak over its depth; a simulated period more than
:data:`PERIOD_TOLERANCE` off the mapping's, when the run uses the mapping's links,
buffers, admission and timing (else the period is reported, not checked).
"""

import argparse
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ..errors import UsageError
from .cluster_link import LinkFraming, boundary_link
from .cluster_node import ClusterPlan, NodeModel, NodeTiming

__all__ = ["ClusterConfig", "simulate", "run_cluster", "load_plan", "config_from_params",
           "failures", "OPTIONS", "PERIOD_TOLERANCE", "main"]

#: Seconds between two progress lines.
PROGRESS_SECONDS = 10.0
#: Largest relative difference of the simulated period from the mapping's that passes
#: (:func:`failures`), when the run uses the mapping's links, buffers and timing.
PERIOD_TOLERANCE = 0.10
_FP, _BP, _RESULT = 1, 2, 3


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """One simulation.

    Attributes
    ----------
    images : int
        Samples through the chain.
    link_gbps : float or None
        Per link and direction; ``None``: the mapping's ``--link-gbps``; 0: unlimited.
    link_latency : int
        Cycles of flight on a link.
    inflight : int or None
        Samples admitted before the oldest has left node 1 (``None``: no limit but the
        Act-RAMs').
    act_ram_samples : float or None
        Every Act-RAM's depth in samples of its input (``None``: the mapping's residency
        per segment; 0: unlimited).
    minibatch : int
        Samples per mini-batch for the stale-weight count (0: none).
    timing : NodeTiming
    """

    images: int = 8
    link_gbps: float | None = None
    link_latency: int = 100
    inflight: int | None = None
    act_ram_samples: float | None = None
    minibatch: int = 0
    timing: NodeTiming = NodeTiming()

    def __post_init__(self):
        _integer("--images", self.images, 1)
        _integer("--link-latency", self.link_latency, 0)
        _integer("--minibatch", self.minibatch, 0)
        if self.inflight is not None:
            _integer("--inflight", self.inflight, 1)
        if self.act_ram_samples is not None and (
                isinstance(self.act_ram_samples, bool)
                or not isinstance(self.act_ram_samples, (int, float))
                or not self.act_ram_samples >= 0 or math.isinf(self.act_ram_samples)):
            raise UsageError(f"act_ram_samples must be a non-negative number (0: unlimited), "
                             f"not {self.act_ram_samples!r}")
        if self.link_gbps is not None and (isinstance(self.link_gbps, bool) or not isinstance(
                self.link_gbps, (int, float)) or not self.link_gbps >= 0):
            raise UsageError(f"--link-gbps must be a non-negative number (0: unlimited), "
                             f"not {self.link_gbps!r}")


def _integer(name, value, least):
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise UsageError(f"{name} must be an integer of at least {least}, not {value!r}")


def load_plan(path):
    """The :class:`ClusterPlan` of ``mapping.json`` at ``path``."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--mapping {path}: no such file (give the mapping.json that "
                         f"'nnrtl map' wrote)")
    try:
        found = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UsageError(f"--mapping {path}: not JSON ({error})") from None
    plan = ClusterPlan(found, where=f"--mapping {path}")
    if plan.convention != "link":
        raise UsageError(f"--mapping {path}: link convention {plan.convention!r}; the "
                         f"simulator models 'link' (the bandwidth per link and direction)")
    return plan


def _gbps(plan, config):
    return plan.link_gbps if config.link_gbps is None else (config.link_gbps or None)


def _nodes(plan, config, first, last):
    gbps = _gbps(plan, config)
    per_word = 0.0 if gbps is None else plan.word_bits * plan.clock_hz / (gbps * 1e9)
    framing = None if gbps is None else LinkFraming.of_link(
        boundary_link(plan.word_bits, gbps, plan.clock_hz))
    return [NodeModel(plan, m, config.timing, per_word, config.link_latency,
                      config.act_ram_samples, framing) for m in range(first, last + 1)]


def blocks(plan, ranks):
    """Contiguous node blocks ``[(first, last), ...]`` (1-based) of ``ranks`` ranks, of
    about equal pixel steps (the simulator's work) each; at least one node each."""
    cost = np.cumsum([sum(3 * (plan.out_px(s.index) + plan.in_px(s.index))
                          for s in node.segments) for node in plan.nodes])
    bounds = [0]
    for r in range(1, ranks):
        cut = int(np.searchsorted(cost, cost[-1] * r / ranks)) + 1
        bounds.append(min(max(cut, bounds[-1] + 1), plan.n - (ranks - r)))
    bounds.append(plan.n)
    return [(a + 1, b) for a, b in zip(bounds, bounds[1:])]


def _pack(plan, j, arrivals, backward):
    specs = plan.backward_streams(j) if backward else plan.forward_streams(j)
    if not specs:
        return np.zeros(0)
    return np.concatenate([arrivals[key] for key, _, _ in specs])


def _unpack(plan, j, data, backward):
    specs = plan.backward_streams(j) if backward else plan.forward_streams(j)
    result, at = {}, 0
    for key, count, _ in specs:
        result[key] = data[at:at + count]
        at += count
    return result


def _rank_loop(plan, config, first, last, log=None):
    """One rank's work on nodes ``first..last``, a generator: it yields ``("send", tag,
    array)`` and ``("recv",)`` (answered with ``(tag, array)``), and returns the nodes'
    summaries."""
    nodes = _nodes(plan, config, first, last)
    head, tail = first == 1, last == plan.n
    fp_next = bp_next = 0
    pending = {_FP: [], _BP: []}
    images = config.images
    shown = time.monotonic()
    while bp_next < images:
        if bp_next < fp_next and (tail or pending[_BP]):
            incoming = {} if tail else _unpack(plan, last, pending[_BP].pop(0), True)
            for node in reversed(nodes):
                incoming = node.backward(bp_next, incoming)
            if not head:
                yield ("send", _BP, _pack(plan, first - 1, incoming, True))
            bp_next += 1
        elif fp_next < images and max(node.needs(fp_next) for node in nodes) < bp_next and (
                pending[_FP] if not head else
                config.inflight is None or fp_next - config.inflight < bp_next):
            inject = 0.0
            if head and config.inflight is not None and fp_next >= config.inflight:
                inject = nodes[0].done[fp_next - config.inflight]
            incoming = {} if head else _unpack(plan, first - 1, pending[_FP].pop(0), False)
            for node in nodes:
                incoming = node.forward(fp_next, incoming, inject)
            if not tail:
                yield ("send", _FP, _pack(plan, last, incoming, False))
            fp_next += 1
        else:
            tag, data = yield ("recv",)
            pending[tag].append(data)
        if log is not None and time.monotonic() - shown > PROGRESS_SECONDS:
            shown = time.monotonic()
            log(f"cluster: nodes {first}-{last}: forward {fp_next}/{images}, backward "
                f"{bp_next}/{images} samples")
    return [node.summary() for node in nodes]


def _run_local(plan, config, ranks, log=None):
    """All ranks in this process, round robin (what MPI computes, without MPI)."""
    spans = blocks(plan, ranks)
    loops = [_rank_loop(plan, config, a, b, log) for a, b in spans]
    inbox = [[] for _ in spans]
    summaries = [None] * ranks
    requests = [None] * ranks
    for r, loop in enumerate(loops):
        try:
            requests[r] = next(loop)
        except StopIteration as stop:
            summaries[r] = stop.value
    while any(s is None for s in summaries):
        moved = False
        for r, loop in enumerate(loops):
            while summaries[r] is None:
                request = requests[r]
                try:
                    if request[0] == "send":
                        inbox[r + 1 if request[1] == _FP else r - 1].append(
                            (request[1], request[2]))
                        requests[r] = loop.send(None)
                    elif inbox[r]:
                        requests[r] = loop.send(inbox[r].pop(0))
                    else:
                        break
                    moved = True
                except StopIteration as stop:
                    summaries[r] = stop.value
                    moved = True
        if not moved:
            raise AssertionError("cluster ranks deadlocked")
    return [s for block in summaries for s in block]


def _run_mpi(plan, config, comm, log=None):
    """This MPI rank's part; rank 0 returns every node's summary, the others ``None``."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    if size > plan.n:
        raise UsageError(f"--ranks {size}: more ranks than the mapping's {plan.n} nodes")
    first, last = blocks(plan, size)[rank]
    results = comm.Dup()          # the summaries apart from the samples' messages
    loop = _rank_loop(plan, config, first, last, log if rank == 0 else None)
    sent = []
    try:
        request = next(loop)
        while True:
            if request[0] == "send":
                buffer = np.ascontiguousarray(request[2], dtype=np.float64)
                dest = rank + 1 if request[1] == _FP else rank - 1
                sent.append((comm.Isend(buffer, dest=dest, tag=request[1]), buffer))
                sent = [(q, b) for q, b in sent if not q.Test()]
                request = loop.send(None)
            else:
                status = MPI.Status()
                comm.Probe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
                data = np.empty(status.Get_count(MPI.DOUBLE), dtype=np.float64)
                comm.Recv(data, source=status.Get_source(), tag=status.Get_tag())
                request = loop.send((status.Get_tag(), data))
    except StopIteration as stop:
        mine = stop.value
    MPI.Request.Waitall([q for q, _ in sent])
    text = np.frombuffer(json.dumps(mine).encode(), dtype=np.uint8)
    if rank:
        results.Send(np.ascontiguousarray(text), dest=0, tag=_RESULT)
        results.Free()
        return None
    found = list(mine)
    for source in range(1, size):
        status = MPI.Status()
        results.Probe(source=source, tag=_RESULT, status=status)
        data = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
        results.Recv(data, source=source, tag=_RESULT)
        found += json.loads(data.tobytes().decode())
    results.Free()
    return found


def _result(plan, config, summaries):
    """The simulation's figures from every node's summary (deterministic: no wall time,
    no rank count)."""
    k = config.images
    done = np.max([s["done"] for s in summaries], axis=0)
    a, b = k // 2, k - 1
    period = float((done[b] - done[a]) / (b - a)) if b > a else None
    clock = plan.clock_hz
    ips = clock / period if period else None
    units = sum(node.mac_units for node in plan.nodes)
    gbps = _gbps(plan, config)
    node_rows, link_rows = [], []
    for s, node in zip(summaries, plan.nodes):
        work = sum(seg.work for seg in node.segments)
        stale = _stale(s["segments"], config.minibatch, k)
        node_rows.append({
            "node": node.node, "layers": [seg.layer for seg in node.segments],
            "idle_share": None if period is None else 1 - work / (node.mac_units * period),
            "act_ram_peak_words": s["act_ram_peak_words"],
            "act_ram_depth_words": s["act_ram_depth_words"],
            "pab_peak_words": s["pab_peak_words"], "pab_depth_words": s["pab_depth_words"],
            "stale_samples": stale})
    for j in range(1, plan.n):
        row = {"between": [j, j + 1]}
        for direction, s, name in (("forward", summaries[j - 1], "down"),
                                   ("backward", summaries[j], "up")):
            words = s["links"][name]["words"] / k
            row[f"{direction}_bits_per_sample"] = words * plan.word_bits
            row[f"{direction}_gbps"] = None if ips is None else \
                words * plan.word_bits * ips / 1e9
        link_rows.append(row)
    busiest = max((max(r["forward_gbps"] or 0, r["backward_gbps"] or 0)
                   for r in link_rows), default=0.0)
    return {
        "network": plan.name, "fpgas": plan.n, "images": k,
        "link_gbps": gbps, "link_latency_cycles": config.link_latency,
        "inflight": config.inflight, "act_ram_samples": config.act_ram_samples,
        "minibatch": config.minibatch,
        "timing": dataclasses.asdict(config.timing),
        "clock_mhz": clock / 1e6,
        "period_cycles": period, "mapper_period_cycles": plan.period,
        "images_per_second": ips,
        "gops_per_fpga": None if ips is None else 2 * plan.work * ips / plan.n / 1e9,
        "idle_share": None if period is None else 1 - plan.work / (units * period),
        "forward_latency_cycles": summaries[-1]["losses"][0],
        "fill_latency_cycles": float(done[0]),
        "done_cycles": [float(d) for d in done],
        "max_link_gbps": busiest,
        "act_ram_within_depth": all(r["act_ram_peak_words"] <= r["act_ram_depth_words"]
                                    for r in node_rows),
        "pab_within_depth": all(r["pab_peak_words"] <= r["pab_depth_words"]
                                for r in node_rows),
        "max_stale_samples": max((r["stale_samples"] for r in node_rows), default=0),
        "period_tolerance": PERIOD_TOLERANCE if _as_mapped(config) else None,
        "nodes": node_rows, "links": link_rows,
    }


def _as_mapped(config):
    """The run uses the mapping's links, Act-RAM depths, admission and node timing (the
    link latency aside), so its period is the mapping's to check."""
    return (config.link_gbps is None and config.act_ram_samples is None
            and config.inflight is None and config.timing == NodeTiming())


def failures(result):
    """What a simulation ``result`` found wrong, one line each: a node whose Act-RAM or
    PAB peak exceeds the mapping's depth, and (when ``period_tolerance`` is set) a
    simulated period more than that share off the mapping's."""
    found = []
    for row in result["nodes"]:
        for name, key in (("Act-RAM", "act_ram"), ("PAB", "pab")):
            peak, depth = row[f"{key}_peak_words"], row[f"{key}_depth_words"]
            if peak > depth:
                found.append(f"node {row['node']}: {name} peak {peak:,} words exceeds its "
                             f"depth {depth:,}")
    tolerance, period = result.get("period_tolerance"), result["period_cycles"]
    mapped = result["mapper_period_cycles"]
    if tolerance is not None and period is not None and abs(period / mapped - 1) > tolerance:
        found.append(f"simulated period {period:,.1f} cycles differs from the mapping's "
                     f"{mapped:,} by {period / mapped - 1:+.1%}, beyond the {tolerance:.0%} "
                     f"tolerance")
    return found


def _stale(segments, minibatch, k):
    """Most samples of a mini-batch whose FP on a segment started before the segment's
    update for the previous mini-batch (spec §3.8)."""
    worst = 0
    if not minibatch:
        return 0
    for seg in segments:
        for end in range(minibatch - 1, k - 1, minibatch):
            update = seg["pg_end"][end]
            nxt = seg["fp_start"][end + 1:end + 1 + minibatch]
            worst = max(worst, sum(1 for t in nxt if t < update))
    return worst


def simulate(plan, config, ranks=1, log=None):
    """The simulation in this process (``ranks`` blocks run round robin, the same
    decomposition MPI runs); the result dict (the model's decisions and figures: Notes).

    Notes
    -----
    [U] decisions:

    * Backpressure: Act-RAM credits. A segment's input pixel enters its Act-RAM when the
      pixel written ``depth`` pixels before has been popped by PG (a FIFO; depth = the
      mapping's residency ``R_s`` times the sample's input, spec §2.9, or
      ``act_ram_samples``); FP waits for it, and on node 1 so does the image (the admission of
      samples). The pixel waits in the link's receive buffer of its stream (one virtual channel
      per stream), so it stalls neither the other streams nor the bypass (DP1), which is
      relayed as it arrives. PAB: credits too. A non-first node of a layer holds a finished
      output pixel in its FP (which starts no other) until the pixel ``depth`` before it has
      left the PAB (its sum with the upstream partial sent on; depth: the mapping's one
      output row, :func:`~.config.pab_pixels`); an upstream partial that arrives first waits
      in its link's receive buffer. The peaks of both are reported beside the mapping's
      depths (spec §5 check 4); the links' receive buffers are unbounded.
      ``inflight`` optionally caps the samples admitted before the oldest has left node 1's
      PG.
    * Links: convention "link" of spec §2.10 (the bandwidth per neighbour link and
      direction), the streams of a boundary in weighted round robin (:class:`.Link`), each
      message charged the RTL link's words for it (:class:`.LinkFraming` of
      :func:`.boundary_link`: words per beat, one header per full packet, partials and
      gradients at their own width), as the mapper's link period (:mod:`.links`) is.
    * Weight update (spec §3.8): a segment updates when its PG has finished the last sample of
      mini-batch ``M``; the samples of ``M + 1`` whose FP started there before are the stale
      ones, counted per node (the paper's "first 5 samples"). The update window itself
      (``⌈n_out/P⌉ · ⌈n_in/Q⌉`` cycles per mini-batch) is not charged.
    * FC layers: their modules take at least the mapping's DDR period per sample (the weights
      stream from DDR once per ``fc_batch``; the DDR's bandwidth is split among the FC
      modules in proportion to their words, so each takes that period), so a sample's FC
      forward and backward passes take about two periods per FC layer, which the mapper's
      Act-RAM residencies hold.
    * Act-RAMs held in DDR (``act_ram_in_ddr``, :mod:`.placement`): the segment's modules
      take at least its node's ``act_ddr_cycles`` per sample (the channel carries every
      such segment's words of a sample in that time); the depth is the DDR region's, the
      same residency, and its peak is checked as an on-chip Act-RAM's.

    Figures: a sample is done when its last PG (or EB) finishes on every node; the period is
    the mean spacing of the done times over the second half of the samples; the fill latency
    is sample 0's round trip (admission to done), the forward latency its admission to its loss;
    idle stages per node ``1 − work / (MAC units · period)`` (spec §2.8, at the simulated
    period); link Gb/s per direction the words each link carried per sample at that rate.
    """
    _integer("--ranks", ranks, 1)
    if ranks > plan.n:
        raise UsageError(f"--ranks {ranks}: more ranks than the mapping's {plan.n} nodes")
    return _result(plan, config, _run_local(plan, config, ranks, log))


def _inside_mpi():
    return any(name in os.environ for name in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE",
                                               "PMIX_RANK", "HYDI_CONTROL_FD"))


def _mpiexec():
    found = Path(sys.executable).parent / "mpiexec"
    if found.is_file():
        return str(found)
    found = shutil.which("mpiexec")
    if found is None:
        raise UsageError("--ranks above 1 needs mpiexec: install nnrtl's 'cluster' extra "
                         "(mpi4py and the mpich wheel)")
    return found


def _argv(mapping, config, ranks):
    argv = ["--mapping", str(mapping), "--ranks", str(ranks), "--images", str(config.images)]
    for name in OPTIONS:
        if name.startswith("timing."):
            value = getattr(config.timing, name[len("timing."):])
        else:
            value = getattr(config, name)
        if value is not None:
            argv += ["--param", f"{name}={value!r}"]
    return argv


def run_cluster(mapping, config, ranks=1, log=None):
    """Simulate ``mapping`` (a path to ``mapping.json``) on ``ranks`` MPI ranks: in this
    process for 1, else as an ``mpiexec -n ranks`` job of this module. Returns ``(result,
    seconds)``, the wall time of the simulation."""
    _integer("--ranks", ranks, 1)
    plan = load_plan(mapping)
    if ranks > plan.n:
        raise UsageError(f"--ranks {ranks}: more ranks than the mapping's {plan.n} nodes")
    began = time.monotonic()
    if ranks == 1:
        return simulate(plan, config, 1, log), time.monotonic() - began
    with tempfile.TemporaryDirectory(prefix="nnrtl-cluster-") as scratch:
        out = Path(scratch) / "cluster.json"
        command = [_mpiexec(), "-n", str(ranks), sys.executable, "-m",
                   "nnrtl.gen.fpdeep.cluster", *_argv(mapping, config, ranks), "-o", str(out)]
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
        if log is not None and done.stderr:
            for line in done.stderr.splitlines():
                log(line)
        if done.returncode not in (0, 1) or not out.is_file():    # 1: a failed check
            raise RuntimeError(f"mpiexec -n {ranks} failed (exit {done.returncode}): "
                               f"{done.stderr.strip()[-2000:]}")
        return json.loads(out.read_text()), time.monotonic() - began


#: ``--param`` options of the ``cluster`` hook: name -> (parser, rule).
OPTIONS = {
    "link_gbps": (float, "a non-negative number (0: unlimited)"),
    "link_latency": (int, "a non-negative integer"),
    "inflight": (int, "a positive integer"),
    "act_ram_samples": (float, "a non-negative number (0: unlimited)"),
    "minibatch": (int, "a non-negative integer"),
    **{f"timing.{f.name}": (int, "a non-negative integer")
       for f in dataclasses.fields(NodeTiming)},
}


def config_from_params(images, params):
    """A :class:`ClusterConfig` from ``--images`` and ``--param k=v`` strings."""
    values, timing = {}, {}
    for text in params:
        name, sep, value = text.partition("=")
        if not sep or name not in OPTIONS:
            raise UsageError(f"--param {text!r}: the cluster simulator's options are "
                             f"{', '.join(f'{k}=...' for k in OPTIONS)}")
        parse, rule = OPTIONS[name]
        try:
            parsed = parse(value)
        except ValueError:
            raise UsageError(f"--param {name} must be {rule}, not {value!r}") from None
        if name.startswith("timing."):
            timing[name[len("timing."):]] = parsed
        else:
            values[name] = parsed
    return ClusterConfig(images=images, timing=NodeTiming(**timing), **values)


def _parser():
    parser = argparse.ArgumentParser(prog="python -m nnrtl.gen.fpdeep.cluster",
                                     description="FPDeep cluster simulator on MPI",
                                     allow_abbrev=False)
    parser.add_argument("--mapping", required=True, metavar="FILE",
                        help="mapping.json written by 'nnrtl map'")
    parser.add_argument("--ranks", type=int, metavar="R", help="MPI ranks (default 1, or "
                        "the size of the external MPI job)")
    parser.add_argument("--images", type=int, default=8, metavar="K", help="samples "
                        "(default 8)")
    parser.add_argument("--param", action="append", default=[], metavar="k=v",
                        help=f"a simulator option ({', '.join(OPTIONS)}); repeatable")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the result as JSON")
    return parser


def _log(line):
    print(line, file=sys.stderr, flush=True)


def main(argv=None):
    """The module's command line; exit code 0, 1 when :func:`failures` finds something
    (after the result is printed and written), or 2 for bad input."""
    args = _parser().parse_args(argv)
    try:
        config = config_from_params(args.images, args.param)
        if _inside_mpi():
            from mpi4py import MPI
            comm = MPI.COMM_WORLD
            if args.ranks is not None and args.ranks != comm.Get_size():
                raise UsageError(f"--ranks {args.ranks}: this MPI job has "
                                 f"{comm.Get_size()} ranks")
            plan = load_plan(args.mapping)
            began = time.monotonic()
            summaries = _run_mpi(plan, config, comm, _log)
            if summaries is None:
                return 0
            result, seconds = _result(plan, config, summaries), time.monotonic() - began
        else:
            result, seconds = run_cluster(args.mapping, config, args.ranks or 1, _log)
    except UsageError as error:
        print(f"cluster: error: {error}", file=sys.stderr)
        return 2
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=1) + "\n")
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        from .cluster_report import format_summary
        print(format_summary(result))
    _log(f"cluster: {seconds:.1f} s wall")
    found = failures(result)
    for line in found:
        print(f"cluster: check failed: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
