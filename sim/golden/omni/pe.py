"""Bit-exact model of :class:`nnrtl.hw.omni.pe.OmniPE`: each job's results from its
operands, as bit patterns.

Per mode (``n`` = the job's ``length``; every operation is one of
:mod:`nnrtl.sim.golden.float`'s, with the configuration's ``flush_subnormals``):

- ``MVM``: the products ``float_mul(input1[k], input2[k])`` summed by
  :func:`nnrtl.sim.golden.accumulator.streaming_sum` with ``adder_stages`` (the
  accumulator's fixed order: slot ``k mod L``, then the reduction tree of ``L``);
- ``EW_MUL``: ``float_mul(input1[k], input2[k])``;
- ``OUTER``: ``float_mul(input1[0], input2[k])``;
- ``EW_ADD``: ``float_add(input1[k], input2[k])``, ``float_sub`` with ``subtract``.

The timing of the RTL (gaps, backpressure, mode switches) changes no bit of a result.
"""

import numpy as np

from nnrtl.hw.omni.config import OmniJob, OmniMode, OmniPEConfig

from ..accumulator import streaming_sums
from ..float import float_add, float_mul, float_sub, pattern_dtype

__all__ = ["job_results", "run_jobs", "split_operands"]


def _check_config(config):
    if not isinstance(config, OmniPEConfig):
        raise TypeError(f"config must be an OmniPEConfig, not {config!r}")


def job_results(config, job, input1, input2):
    """The results of one job.

    Parameters
    ----------
    config : OmniPEConfig
    job : OmniJob
    input1, input2 : array of int
        Bit patterns: ``job.inputs1`` and ``job.inputs2`` of them.

    Returns
    -------
    ndarray of pattern_dtype(config.fmt)
        ``job.results`` bit patterns.

    Raises
    ------
    ValueError
        If an operand count does not match the job.
    """
    _check_config(config)
    config.check_job(job)
    fmt, flush = config.fmt, config.flush_subnormals
    input1 = np.asarray(input1, dtype=np.uint64).ravel()
    input2 = np.asarray(input2, dtype=np.uint64).ravel()
    for name, values, want in (("input1", input1, job.inputs1),
                               ("input2", input2, job.inputs2)):
        if values.size != want:
            raise ValueError(f"{name} holds {values.size} values, not {want} (a "
                             f"{job.mode.name} job of length {job.length})")
    if job.mode is OmniMode.EW_ADD:
        op = float_sub if job.subtract else float_add
        return op(fmt, input1, input2, flush_subnormals=flush)
    if job.mode is OmniMode.OUTER:
        input1 = np.full(job.length, input1[0], dtype=np.uint64)
    products = float_mul(fmt, input1, input2, flush_subnormals=flush)
    if job.mode is OmniMode.MVM:
        return streaming_sums(fmt, [products], adder_stages=config.adder_stages,
                              flush_subnormals=flush)
    return products


def split_operands(jobs, input1, input2):
    """Cut the Input1 / Input2 streams (concatenated over ``jobs`` in job order) into
    each job's operands: a list of ``(operands1, operands2)``."""
    input1 = np.asarray(input1, dtype=np.uint64).ravel()
    input2 = np.asarray(input2, dtype=np.uint64).ravel()
    need1 = sum(job.inputs1 for job in jobs)
    need2 = sum(job.inputs2 for job in jobs)
    if (input1.size, input2.size) != (need1, need2):
        raise ValueError(f"the jobs take {need1} Input1 and {need2} Input2 values, not "
                         f"{input1.size} and {input2.size}")
    ends1 = np.cumsum([0] + [job.inputs1 for job in jobs])
    ends2 = np.cumsum([0] + [job.inputs2 for job in jobs])
    return [(input1[ends1[k]:ends1[k + 1]], input2[ends2[k]:ends2[k + 1]])
            for k in range(len(jobs))]


def run_jobs(config, jobs, input1, input2):
    """The PE's output stream for ``jobs`` (a sequence of :class:`OmniJob`) run in order on
    the Input1 / Input2 streams ``input1`` / ``input2``: one array of results per job."""
    _check_config(config)
    jobs = list(jobs)
    for job in jobs:
        if not isinstance(job, OmniJob):
            raise TypeError(f"job must be an OmniJob, not {job!r}")
    return [np.asarray(job_results(config, job, a, b), dtype=pattern_dtype(config.fmt))
            for job, (a, b) in zip(jobs, split_operands(jobs, input1, input2))]
