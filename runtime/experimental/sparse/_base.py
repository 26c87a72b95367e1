"""`JAXSparse`, the base class of kiln's sparse formats (JAX's name): what a format's layout
properties give (size, rank, `repr`, `.T`), and `concrete_nse`, the count of stored elements
that needs concrete values."""
import math

import numpy as np

from ... import numpy as jnp
from ...compiler.errors import ConcretizationError

__all__ = ["JAXSparse"]


class JAXSparse:
    """A sparse array: subclasses hold `data` and index arrays and define `nse`, `n_batch`,
    `n_dense`, `transpose` and `todense`."""

    __array_priority__ = 2000

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    def __len__(self):
        return self.shape[0]

    @property
    def T(self):
        return self.transpose()

    def __repr__(self):
        extra = f", nse={self.nse}"
        if self.n_batch:
            extra += f", n_batch={self.n_batch}"
        if self.n_dense:
            extra += f", n_dense={self.n_dense}"
        return f"{type(self).__name__}({np.dtype(self.dtype).name}{list(self.shape)}{extra})"

    def block_until_ready(self):
        for leaf in self.tree_flatten()[0]:
            leaf.block_until_ready()
        return self


def concrete_nse(counts, what, where):
    """max(counts) as a Python int; under `jit` (traced counts) a ConcretizationError naming
    `what` was counted and `where` to pass `nse` instead."""
    try:
        return int(jnp.max(counts)) if counts.size else 0
    except ConcretizationError as err:
        raise ConcretizationError(
            f"{where}: the nse argument (number of stored elements) must be a concrete "
            f"integer: without it kiln counts the {what}, whose number is only known when the "
            f"compiled function runs.", None,
            f"Pass nse=... (an upper bound on the number of {what}) to {where} inside "
            f"jit.") from err
