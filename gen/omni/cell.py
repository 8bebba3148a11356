"""The LSTM cell in training, split as the η-LSTM hardware runs it (spec §1, paper §II).

FW cell (paper eq. 1, Fig. 2a): :func:`fw_matmul` (the MatMul part) then :func:`fw_ew`
(the element-wise part). BP cell (Fig. 2b): :func:`bp_ew_part1` (BP-EW-P1, from FW
intermediates only), :func:`bp_ew_part2` (BP-EW-P2, the products with the gradients),
:func:`bp_matmul_inner` (eq. 2) and :func:`bp_matmul_outer` (eq. 3).

Layout. The weights are PyTorch's ``nn.LSTM`` tensors of one layer: ``weight_ih``
(4H x I, the paper's W), ``weight_hh`` (4H x H, the paper's U), ``bias_ih`` and ``bias_hh``
(4H each, their sum is the paper's b). The gates are stacked in PyTorch's order
``i, f, c, o`` (PyTorch calls the cell gate ``g``); the paper lists them ``f, i, c, o``,
only the order differs. Vectors are batch first inside a cell: ``x`` is B x I, ``h`` and
``s`` B x H, the gate pre-activations B x 4H.

BP-EW-P1 (spec §2.1 [D], the paper enumerates only ``p_i``) are six B x H vectors, stacked
as :data:`PART1` (B x 6 x H)::

    p_o = tanh(s_t) * o_t * (1 - o_t)      p_s = o_t * (1 - tanh(s_t)**2)
    p_i = c_t * i_t * (1 - i_t)            p_f = s_{t-1} * f_t * (1 - f_t)
    p_c = i_t * (1 - c_t**2)               p_S = f_t

and BP-EW-P2, with ``dh = dY_t + dH_t`` (the gradient from the layer above plus the one
from the next timestamp)::

    do^ = dh * p_o       ds = dS_t + dh * p_s       di^ = ds * p_i
    df^ = ds * p_f       dc^ = ds * p_c             dS_{t-1} = ds * p_S

The baseline BP computes the same P1 vectors from the stored FW intermediates at BP time
and then the same P2: so moving P1 into FW (MS1) at threshold 0 gives bit-identical
gradients (same operations in the same order), and both equal PyTorch autograd of
``nn.LSTM`` up to floating-point rounding order (autograd's derivative formulas associate
the products differently).
"""

__all__ = ["PART1", "fw_matmul", "fw_ew", "bp_ew_part1", "bp_ew_part2", "bp_matmul_inner",
           "bp_matmul_outer", "input_projection"]

#: The order of the six BP-EW-P1 vectors in a B x 6 x H part-1 tensor.
PART1 = ("p_o", "p_s", "p_i", "p_f", "p_c", "p_S")


def input_projection(xs, weight_ih, bias):
    """The ``W x_t + b`` half of FW-MatMul for every timestamp of a layer at once.

    Parameters
    ----------
    xs : tensor, T x B x I
    weight_ih : tensor, 4H x I
    bias : tensor, 4H (``bias_ih + bias_hh``)

    Returns
    -------
    tensor, T x B x 4H. The layer input is known before the layer runs, so this half of
    eq. 1 needs no cell-by-cell order (same MACs as per cell).
    """
    import torch

    return torch.matmul(xs, weight_ih.t()) + bias


def fw_matmul(projected, h_prev, weight_hh):
    """FW-MatMul of one cell (eq. 1 before the activations): ``W x_t + b + U h_{t-1}``.

    ``projected`` is this timestamp's slice of :func:`input_projection` (B x 4H),
    ``h_prev`` B x H, ``weight_hh`` 4H x H. Returns the gate pre-activations, B x 4H."""
    return projected + h_prev @ weight_hh.t()


def fw_ew(pre, s_prev):
    """FW-EW of one cell: activations, cell state and output.

    Returns ``(gates, s, h)``: ``gates`` a tuple ``(i, f, c, o)`` of B x H (sigmoid for
    i, f, o; tanh for the cell gate c), ``s = f*s_prev + i*c`` and ``h = o*tanh(s)``."""
    import torch

    i, f, c, o = pre.chunk(4, dim=1)
    i, f, o = torch.sigmoid(i), torch.sigmoid(f), torch.sigmoid(o)
    c = torch.tanh(c)
    s = f * s_prev + i * c
    h = o * torch.tanh(s)
    return (i, f, c, o), s, h


def bp_ew_part1(gates, s, s_prev):
    """BP-EW-P1 of one cell: the six vectors of :data:`PART1`, stacked B x 6 x H.

    Depends on FW intermediates only (``gates`` from :func:`fw_ew`, ``s`` = s_t,
    ``s_prev`` = s_{t-1}), so MS1 runs it in the FW phase right after :func:`fw_ew`."""
    import torch

    i, f, c, o = gates
    tanh_s = torch.tanh(s)
    return torch.stack((tanh_s * o * (1 - o), o * (1 - tanh_s * tanh_s), c * i * (1 - i),
                        s_prev * f * (1 - f), i * (1 - c * c), f), dim=1)


def bp_ew_part2(part1, dh, ds_next):
    """BP-EW-P2 of one cell.

    Parameters
    ----------
    part1 : tensor, B x 6 x H
        :func:`bp_ew_part1`'s output (MS1: pruned, after the compress/decode round trip).
    dh : tensor, B x H
        ``dY_t + dH_t``.
    ds_next : tensor, B x H
        ``dS_t``, the cell-state gradient from timestamp t+1.

    Returns
    -------
    (dgates, ds_prev) : the pre-activation gate gradients B x 4H in the weights' gate order
        ``i, f, c, o`` and ``dS_{t-1}`` (B x H).
    """
    import torch

    p_o, p_s, p_i, p_f, p_c, p_S = part1.unbind(1)
    do = dh * p_o
    ds = ds_next + dh * p_s
    dgates = torch.cat((ds * p_i, ds * p_f, ds * p_c, do), dim=1)
    return dgates, ds * p_S


def bp_matmul_inner(dgates, weight):
    """BP-MatMul, inner product (eq. 2): ``W^T . dgates`` (δX_t with ``weight_ih``,
    δH_{t-1} with ``weight_hh``). ``dgates`` B x 4H (or T x B x 4H for all timestamps of
    a layer at once); returns B x I or B x H."""
    return dgates @ weight


def bp_matmul_outer(dgates, operand):
    """BP-MatMul, outer product (eq. 3): ``dgates ⊗ operand`` summed over the batch (and
    over the timestamps when both are T x B x ...): the δW (``operand`` = x) or δU
    (``operand`` = h_{t-1}) contribution, 4H x I or 4H x H."""
    return dgates.reshape(-1, dgates.shape[-1]).t() @ operand.reshape(-1, operand.shape[-1])
