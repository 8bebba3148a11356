"""Input and target arrays from ``.npy`` files, read without unpickling."""

import os

import numpy as np

from ..errors import UsageError

__all__ = ["load_array"]


def load_array(path, *, what, ndim=None, last=None, keep_dtype=False):
    """A float64 array from a ``.npy`` file.

    Parameters
    ----------
    path : path
    what : str
        What the array is, for messages (e.g. ``"inputs"``).
    ndim : int or tuple of int, optional
        The dimensions allowed.
    last : int, optional
        The size the last dimension must have.
    keep_dtype : bool
        Return the array in the dtype it was stored in (integer token ids stay integers),
        after the same checks.

    Raises
    ------
    UsageError
        A missing file, a file that is not ``.npy`` (text, a pickled object array: never
        unpickled), a dtype other than integer or floating point, a wrong ``ndim`` or last
        dimension, an empty array, NaN or infinite values; naming the file.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file ({what})")
    try:
        with open(path, "rb") as file:
            magic = file.read(6)
    except OSError as error:
        raise UsageError(f"{path}: cannot read the {what} ({error.strerror})") from None
    if magic != b"\x93NUMPY":
        raise UsageError(f"{path}: the {what} are not a .npy file (it does not begin with "
                         f"numpy's magic string; a text file? write arrays with numpy.save)")
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as error:
        raise UsageError(f"{path}: the {what} are not a plain .npy array ({error})") from None
    except (OSError, EOFError) as error:
        raise UsageError(f"{path}: the {what} are not a .npy array ({error})") from None
    if not isinstance(array, np.ndarray):
        raise UsageError(f"{path}: the {what} must be one .npy array, not an .npz archive")
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.integer)
                                       or np.issubdtype(array.dtype, np.floating)):
        raise UsageError(f"{path}: the {what} have dtype {array.dtype}; integers or floating "
                         f"point are needed")
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if allowed is not None and array.ndim not in allowed:
        raise UsageError(f"{path}: the {what} have {array.ndim} dimensions (shape "
                         f"{array.shape}); {' or '.join(map(str, allowed))} are needed")
    if last is not None and (array.ndim == 0 or array.shape[-1] != last):
        raise UsageError(f"{path}: the {what} have shape {array.shape}; the last dimension "
                         f"must be {last}")
    if array.size == 0:
        raise UsageError(f"{path}: the {what} are empty (shape {array.shape})")
    if not np.all(np.isfinite(array)):
        raise UsageError(f"{path}: the {what} have NaN or infinite values")
    return array if keep_dtype else array.astype(np.float64)
