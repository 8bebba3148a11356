"""η-LSTM (Omni-PE channels) software, spec §1, §2, §5.5-5.6.

* :mod:`.cell` -- the FW cell (FW-MatMul, FW-EW) and the BP cell (BP-EW-P1, BP-EW-P2,
  BP-MatMul eqs. 2-3) as separate functions, the parts the hardware runs;
* :mod:`.compress` -- MS1's pruning and the compressed record (bitmap index + fp32
  values): the contract with the DMA's compression module and decoder;
* :mod:`.skipping` -- MS2: eq. 4, eq. 5, α, the skip map, the convergence-aware scaling;
* :mod:`.training` -- :func:`~.training.forward` / :func:`~.training.backward` of an LSTM
  stack with MS1 and MS2 (:class:`~.training.MsConfig`), gradients equal to autograd;
* :mod:`.accounting` -- footprint and data movement per iteration, Table I shapes;
* :mod:`.studies.accuracy` -- the real tasks (digits, single loss; a character LM on CPython's
  ``pydoc_data``, per-timestamp loss) against unmodified PyTorch training.
"""
