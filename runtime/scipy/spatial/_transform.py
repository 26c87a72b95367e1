"""The implementation of `kiln.scipy.spatial.transform`: `Rotation` and `Slerp`, as
`jax.scipy.spatial.transform` has them (`__all__`, re-exported there).

A `Rotation` is a NamedTuple holding one unit quaternion `quat` in scalar-last order (x, y, z,
w), shape (4,), or a stack of them, shape (..., 4); a `Slerp` is a NamedTuple of arrays and a
`Rotation`. Both are therefore pytrees: they pass into and out of `jit`, `vmap` and `grad`, and
their methods are plain `kiln.numpy` code that works eagerly and under every transform. Every
conversion broadcasts over the leading axes of the quaternions (and of the other operand, for
`apply` and `*`). Angles are in radians unless `degrees=True`. The conversions follow SciPy's
formulas, with JAX's choices where they differ from SciPy: `from_euler` takes one angle per
axis of `seq` in the last axis of `angles`; `as_euler` needs three axes; `identity` takes no
`num`; `random` raises `NotImplementedError`; `mean` takes the dominant eigenvector of the
weighted quaternion outer-product sum (its sign is arbitrary, the rotation is not); `Slerp`
does not check that its times increase.
"""
import re
import typing

import numpy as np

from ... import numpy as jnp
from ...numpy._core import promote_dtypes_inexact

__all__ = ["Rotation", "Slerp"]


def _inexact(x):
    (x,) = promote_dtypes_inexact(jnp.asarray(x))
    return x


def _norm(v):
    return jnp.sqrt(jnp.sum(v * v, axis=-1))


def _normalized(quat):
    quat = _inexact(quat)
    return quat / _norm(quat)[..., None]


def _compose(p, q):
    """The quaternion product p q: the rotation q followed by p."""
    pv, pw = p[..., :3], p[..., 3:]
    qv, qw = q[..., :3], q[..., 3:]
    vector = pw * qv + qw * pv + jnp.cross(pv, qv)
    scalar = pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)
    scalar = jnp.broadcast_to(scalar, vector.shape[:-1] + (1,))
    return jnp.concatenate([vector, scalar], axis=-1)


def _matrix(quat):
    x, y, z, w = (quat[..., n] for n in range(4))
    rows = [[x * x - y * y - z * z + w * w, 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), -x * x + y * y - z * z + w * w, 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), -x * x - y * y + z * z + w * w]]
    return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)


def _quat_from_matrix(matrix):
    """SciPy's construction: of the four candidate quaternions (one per diagonal entry and
    one from the trace), the one built on the largest of m00, m11, m22 and the trace."""
    matrix = _inexact(matrix)
    m = lambda r, c: matrix[..., r, c]  # noqa: E731
    trace = m(0, 0) + m(1, 1) + m(2, 2)
    candidates = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        parts = [None] * 4
        parts[i] = 1 - trace + 2 * m(i, i)
        parts[j] = m(j, i) + m(i, j)
        parts[k] = m(k, i) + m(i, k)
        parts[3] = m(k, j) - m(j, k)
        candidates.append(jnp.stack(parts, axis=-1))
    candidates.append(jnp.stack([m(2, 1) - m(1, 2), m(0, 2) - m(2, 0), m(1, 0) - m(0, 1),
                                 1 + trace], axis=-1))
    choice = jnp.argmax(jnp.stack([m(0, 0), m(1, 1), m(2, 2), trace], axis=-1), axis=-1)
    quat = candidates[3]
    for n in (2, 1, 0):
        quat = jnp.where((choice == n)[..., None], candidates[n], quat)
    return _normalized(quat)


def _quat_from_rotvec(rotvec, degrees):
    rotvec = _inexact(rotvec)
    if degrees:
        rotvec = jnp.deg2rad(rotvec)
    angle = _norm(rotvec)
    angle2 = angle * angle
    # sin(angle / 2) / angle, by its Taylor series near 0
    scale = jnp.where(angle <= 1e-3, 0.5 - angle2 / 48 + angle2 * angle2 / 3840,
                      jnp.sin(angle / 2) / angle)
    return jnp.concatenate([scale[..., None] * rotvec, jnp.cos(angle / 2)[..., None]], axis=-1)


def _rotvec(quat, degrees):
    quat = jnp.where(quat[..., 3:] < 0, -quat, quat)     # w >= 0: the angle is in [0, pi]
    angle = 2 * jnp.arctan2(_norm(quat[..., :3]), quat[..., 3])
    angle2 = angle * angle
    # angle / sin(angle / 2), by its Taylor series near 0
    scale = jnp.where(angle <= 1e-3, 2 + angle2 / 12 + 7 * angle2 * angle2 / 2880,
                      angle / jnp.sin(angle / 2))
    if degrees:
        scale = jnp.rad2deg(scale)
    return scale[..., None] * quat[..., :3]


def _canonical(quat):
    """The sign of `quat` whose first nonzero entry of w, x, y, z is positive."""
    x, y, z, w = (quat[..., n] for n in range(4))
    flip = (w < 0) | ((w == 0) & ((x < 0) | ((x == 0) & ((y < 0) | ((y == 0) & (z < 0))))))
    return jnp.where(flip[..., None], -quat, quat)


def _check_seq(seq, lengths):
    if len(seq) not in lengths:
        return False
    if not (re.fullmatch(r"[XYZ]+", seq) or re.fullmatch(r"[xyz]+", seq)):
        raise ValueError("Expected axes from `seq` to be from ['x', 'y', 'z'] or "
                         f"['X', 'Y', 'Z'], got {seq}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Expected consecutive axes to be different, got {seq}")
    return True


def _elementary(axis, angle):
    zero = jnp.zeros_like(angle)
    half = angle / 2
    parts = [zero, zero, zero, jnp.cos(half)]
    parts[axis] = jnp.sin(half)
    return jnp.stack(parts, axis=-1)


def _euler(quat, seq, degrees):
    """SciPy's quaternion-to-Euler method (Bernardes and Viollet, 2022), with the axes known
    when the function is specialised."""
    extrinsic = seq.islower()
    axes = ["xyz".index(a) for a in seq.lower()]
    if not extrinsic:
        axes = axes[::-1]
    i, j, k = axes
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2
    q = [quat[..., n] for n in range(4)]
    if symmetric:
        a, b, c, d = q[3], q[i], q[j], q[k] * sign
    else:
        a, b, c, d = q[3] - q[j], q[i] + q[k] * sign, q[j] + q[3], q[k] * sign - q[i]
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    eps = 1e-7
    case = jnp.where(jnp.abs(middle) <= eps, 1, jnp.where(jnp.abs(middle - np.pi) <= eps, 2, 0))
    half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
    # In the two degenerate cases (middle angle 0 or pi) the third angle is set to 0 and the
    # first one carries the whole rotation about the outer axis.
    degenerate = jnp.where(case == 1, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
    zero = jnp.zeros_like(middle)
    first = jnp.where(case == 0, half_sum - half_diff, degenerate if extrinsic else zero)
    third = jnp.where(case == 0, half_sum + half_diff, zero if extrinsic else degenerate)
    if not symmetric:
        third = third * sign
        middle = middle - np.pi / 2
    angles = jnp.stack([first, middle, third] if extrinsic else [third, middle, first], axis=-1)
    angles = (angles + np.pi) % (2 * np.pi) - np.pi
    return jnp.rad2deg(angles) if degrees else angles


class Rotation(typing.NamedTuple):
    """A rotation in three dimensions, or a stack of them, held as unit quaternions `quat`
    (scalar last): `scipy.spatial.transform.Rotation` as JAX has it."""
    quat: typing.Any

    @classmethod
    def concatenate(cls, rotations: typing.Sequence):
        """The rotations of each of `rotations`, in order, as one stack."""
        return cls(jnp.concatenate([rotation.quat for rotation in rotations]))

    @classmethod
    def from_euler(cls, seq: str, angles, degrees: bool = False):
        """Rotations from Euler angles about the axes `seq`: up to three of 'xyz'
        (extrinsic: fixed axes) or of 'XYZ' (intrinsic: the rotating body's axes); the last
        axis of `angles` holds one angle per axis."""
        if not _check_seq(seq, (1, 2, 3)):
            raise ValueError("Expected axis specification to be a non-empty string of upto 3 "
                             f"characters, got {seq}")
        angles = jnp.atleast_1d(_inexact(angles))
        if angles.shape[-1] != len(seq):
            raise ValueError(f"from_euler: `seq` {seq!r} names {len(seq)} axes, so the last "
                             f"axis of `angles` must have {len(seq)} angles; angles have shape "
                             f"{angles.shape}")
        if degrees:
            angles = jnp.deg2rad(angles)
        axes = ["xyz".index(a) for a in seq.lower()]
        quat = _elementary(axes[0], angles[..., 0])
        for n in range(1, len(seq)):
            step = _elementary(axes[n], angles[..., n])
            quat = _compose(quat, step) if seq.isupper() else _compose(step, quat)
        return cls(quat)

    @classmethod
    def from_matrix(cls, matrix):
        """Rotations from rotation matrices (..., 3, 3)."""
        return cls(_quat_from_matrix(matrix))

    @classmethod
    def from_mrp(cls, mrp):
        """Rotations from modified Rodrigues parameters (..., 3)."""
        mrp = _inexact(mrp)
        s = jnp.sum(mrp * mrp, axis=-1, keepdims=True) + 1
        return cls(jnp.concatenate([2 * mrp, 2 - s], axis=-1) / s)

    @classmethod
    def from_quat(cls, quat):
        """Rotations from quaternions (..., 4), scalar last; they are normalised."""
        return cls(_normalized(quat))

    @classmethod
    def from_rotvec(cls, rotvec, degrees: bool = False):
        """Rotations from rotation vectors (..., 3): axis times angle."""
        return cls(_quat_from_rotvec(rotvec, degrees))

    @classmethod
    def identity(cls, num: typing.Optional[int] = None, dtype=float):
        """The identity rotation (one only: `num` must be None, as in JAX)."""
        if num is not None:
            raise AssertionError(f"Rotation.identity: num={num!r}; JAX's identity makes one "
                                 "rotation only, so num must be None (stack identities with "
                                 "Rotation.from_quat(jnp.tile(jnp.array([0., 0., 0., 1.]), "
                                 "(num, 1))))")
        return cls(jnp.array([0., 0., 0., 1.], dtype=dtype))

    @classmethod
    def random(cls, random_key, num: typing.Optional[int] = None):
        """Not implemented, as in JAX."""
        raise NotImplementedError(
            "Rotation.random is not implemented (nor is it in JAX 0.10.2); uniformly "
            "distributed rotations are Rotation.from_quat(kiln.random.normal(key, (num, 4)))")

    def __getitem__(self, indexer):
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self):
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    def __mul__(self, other):
        """The composition: `other` first, then `self`."""
        return Rotation.from_quat(_compose(self.quat, other.quat))

    def apply(self, vectors, inverse: bool = False):
        """The rotated vectors (..., 3) (rotated by the inverse with `inverse=True`)."""
        matrix = self.as_matrix()
        if inverse:
            matrix = jnp.swapaxes(matrix, -1, -2)
        return jnp.matmul(matrix, jnp.asarray(vectors)[..., None])[..., 0]

    def as_euler(self, seq: str, degrees: bool = False):
        """Euler angles (..., 3) about the three axes `seq` ('xyz'-style extrinsic or
        'XYZ'-style intrinsic); the middle angle is in [0, pi] for symmetric sequences and in
        [-pi/2, pi/2] otherwise."""
        if not _check_seq(seq, (3,)):
            raise ValueError(f"Expected 3 axes, got {seq}.")
        return _euler(self.quat, seq, degrees)

    def as_matrix(self):
        """The rotation matrices (..., 3, 3)."""
        return _matrix(self.quat)

    def as_mrp(self):
        """Modified Rodrigues parameters (..., 3), of the rotations' angles at most pi."""
        sign = jnp.where(self.quat[..., 3:] < 0, -1.0, 1.0)
        return sign * self.quat[..., :3] / (1 + sign * self.quat[..., 3:])

    def as_rotvec(self, degrees: bool = False):
        """Rotation vectors (..., 3): the axis times the angle in [0, pi]."""
        return _rotvec(self.quat, degrees)

    def as_quat(self, canonical: bool = False, scalar_first: bool = False):
        """The quaternions (..., 4), scalar last unless `scalar_first`; `canonical` picks the
        sign with w > 0 (or the first nonzero of x, y, z positive when w is 0)."""
        quat = _canonical(self.quat) if canonical else self.quat
        return jnp.roll(quat, 1, axis=-1) if scalar_first else quat

    def inv(self):
        """The inverse rotations."""
        return Rotation(self.quat * jnp.array([-1, -1, -1, 1], dtype=self.quat.dtype))

    def magnitude(self):
        """The rotation angles, in [0, pi]."""
        return 2 * jnp.arctan2(_norm(self.quat[..., :3]), jnp.abs(self.quat[..., 3]))

    def mean(self, weights=None):
        """The (weighted) mean rotation of a stack of rotations, one rotation."""
        dtype = self.quat.dtype
        w = (jnp.ones(self.quat.shape[0], dtype=dtype) if weights is None
             else jnp.asarray(weights, dtype=dtype))
        if w.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {w.shape}.")
        if w.shape[0] != len(self):
            raise ValueError("Expected `weights` to have number of values equal to number of "
                             f"rotations, got {w.shape[0]} values and {len(self)} rotations.")
        outer = jnp.matmul(w[None, :] * self.quat.T, self.quat)
        _, vectors = jnp.linalg.eigh(outer)
        return Rotation(vectors[:, -1])

    @property
    def single(self) -> bool:
        """Whether this is one rotation rather than a stack."""
        return self.quat.ndim == 1


class Slerp(typing.NamedTuple):
    """Spherical linear interpolation between key rotations at key times:
    `scipy.spatial.transform.Slerp` as JAX has it (build one with `Slerp.init`)."""
    times: typing.Any
    timedelta: typing.Any
    rotations: Rotation
    rotvecs: typing.Any

    @classmethod
    def init(cls, times, rotations: Rotation):
        """The interpolator through `rotations` (at least two) at the increasing `times`."""
        if not isinstance(rotations, Rotation):
            raise TypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError("Expected times to be specified in a 1 dimensional array, got "
                             f"{times.ndim} dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError("Expected number of rotations to be equal to number of timestamps "
                             f"given, got {len(rotations)} rotations and {times.shape[0]} "
                             "timestamps.")
        starts = Rotation(rotations.quat[:-1])
        steps = starts.inv() * Rotation(rotations.quat[1:])
        return cls(times=times, timedelta=jnp.diff(times), rotations=starts,
                   rotvecs=steps.as_rotvec())

    def __call__(self, times):
        """The interpolated rotations at `times` (a scalar gives one rotation); times outside
        the key times extrapolate from the first or last interval."""
        at = jnp.asarray(times, dtype=self.times.dtype)
        if at.ndim > 1:
            raise ValueError("`times` must be at most 1-dimensional.")
        single = at.ndim == 0
        at = jnp.atleast_1d(at)
        interval = jnp.maximum(jnp.searchsorted(self.times, at) - 1, 0)
        alpha = (at - self.times[interval]) / self.timedelta[interval]
        result = self.rotations[interval] * Rotation.from_rotvec(
            self.rotvecs[interval] * alpha[:, None])
        return result[0] if single else result
