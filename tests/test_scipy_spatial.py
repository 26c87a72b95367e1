"""kiln.scipy.spatial.transform (Rotation, Slerp) against JAX 0.10.2's: every conversion's
values, composition, application, mean and interpolation, eagerly and under jit, vmap and
grad, and the errors JAX raises."""
import numpy as np
import pytest

import kiln
from kiln.scipy.spatial.transform import Rotation, Slerp

jax = pytest.importorskip("jax")
from jax.scipy.spatial.transform import Rotation as JRotation, Slerp as JSlerp  # noqa: E402

RNG = np.random.default_rng(0)
QUATS = RNG.normal(size=(5, 4)).astype(np.float32)
SEQS = ["xyz", "ZYX", "zxz", "XYX", "XZ", "y"]


def close(got, want, tol=2e-5):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)
    assert np.asarray(got).dtype == np.asarray(want).dtype


def same(computation, *args, tol=2e-5):
    """`computation(Rotation, Slerp, *args)` run by kiln eagerly and by JAX under one `jit`
    (one compile instead of one per operation), its list of results compared."""
    ours = computation(Rotation, Slerp, *args)
    theirs = jax.jit(lambda *a: computation(JRotation, JSlerp, *a))(*args)
    assert len(ours) == len(theirs)
    for got, want in zip(ours, theirs):
        close(got, want, tol)


def conversions(R, S, quats):
    r = R.from_quat(quats)
    out = [r.quat, r.as_matrix(), r.as_rotvec(), r.as_mrp(), r.magnitude(),
           r.as_rotvec(degrees=True) / 100]
    out += [r.as_quat(canonical, first) for canonical in (False, True) for first in (False, True)]
    out += [R.from_matrix(r.as_matrix()).quat, R.from_rotvec(r.as_rotvec()).quat,
            R.from_rotvec(0 * quats[0, :3]).quat,
            R.from_rotvec(r.as_rotvec(True), degrees=True).quat, R.from_mrp(r.as_mrp()).quat,
            R.identity().quat, R.identity(dtype=np.float16).quat]
    return out


def test_conversions_match_jax():
    same(conversions, QUATS)


def euler(R, S, quats, angles, seq):
    out = [R.from_euler(seq, angles).quat,
           R.from_euler(seq, angles * 57.29578, degrees=True).quat]
    if len(seq) == 3:
        r = R.from_quat(quats)
        # a middle angle of 0: the degenerate case puts the whole turn in one outer angle
        flat = R.from_euler(seq, angles[0] * np.array([1, 1e-9, 1], np.float32))
        out += [r.as_euler(seq), r.as_euler(seq, degrees=True) / 100, flat.as_euler(seq)]
    return out


@pytest.mark.parametrize("seq", SEQS)
def test_euler_angles_match_jax(seq):
    angles = RNG.uniform(-3, 3, (4, len(seq))).astype(np.float32)
    same(lambda R, S, q, a: euler(R, S, q, a, seq), QUATS, angles)


def composition(R, S, quats, vectors, weights):
    r = R.from_quat(quats)
    out = [(r * r[::-1]).quat, (r[1] * r).quat, r.inv().quat,
           R.concatenate([r, r[:2]]).quat]
    for inverse in (False, True):
        out += [r.apply(vectors, inverse), r.apply(vectors[0], inverse),
                r[2].apply(vectors, inverse)]
    # the eigenvector's sign is arbitrary; the rotation is not
    out += [r.mean().as_matrix(), r.mean(weights).as_matrix()]
    return out


def test_composition_application_mean_and_indexing_match_jax():
    vectors = RNG.normal(size=(5, 3)).astype(np.float32)
    same(composition, QUATS, vectors, np.arange(1.0, 6.0, dtype=np.float32), tol=1e-4)
    ours = Rotation.from_quat(QUATS)
    assert len(ours) == 5 and ours[1:3].quat.shape == (2, 4) and ours[0].single


def slerp(R, S, quats, times, queries):
    interpolate = S.init(times, R.from_quat(quats))
    return [interpolate(queries).quat, interpolate(queries[2]).quat]


def test_slerp_matches_jax():
    times = np.array([0.0, 1.0, 2.5, 3.0, 4.0], np.float32)
    queries = np.array([-0.5, 0.2, 1.7, 3.0, 3.9, 5.0], np.float32)
    same(slerp, QUATS, times, queries)
    assert Slerp.init(times, Rotation.from_quat(QUATS))(1.3).single


def test_transforms_match_jax():
    angles = RNG.uniform(-1, 1, (3, 3)).astype(np.float32)

    def euler_roundtrip(module, a):
        return module.from_euler("XYZ", a).as_euler("zxz").sum()

    close(kiln.jit(lambda r: r.as_euler("xyz"))(Rotation.from_quat(QUATS)),
          jax.jit(lambda r: r.as_euler("xyz"))(JRotation.from_quat(QUATS)))
    # a Rotation in and out of jit, and through vmap, as a pytree
    got = kiln.jit(lambda r, q: r * Rotation.from_quat(q))(Rotation.from_quat(QUATS[0]), QUATS)
    assert isinstance(got, Rotation)
    close(got.quat, jax.jit(lambda q: (JRotation.from_quat(q[0]) * JRotation.from_quat(q)).quat)(
        QUATS))
    close(kiln.vmap(lambda q: Rotation.from_quat(q).as_rotvec())(QUATS),
          jax.jit(jax.vmap(lambda q: JRotation.from_quat(q).as_rotvec()))(QUATS))
    close(kiln.grad(lambda a: euler_roundtrip(Rotation, a))(angles),
          jax.jit(jax.grad(lambda a: euler_roundtrip(JRotation, a)))(angles), 1e-4)
    slerp = Slerp.init(np.arange(5.0, dtype=np.float32), Rotation.from_quat(QUATS))
    jslerp = jax.jit(lambda q: JSlerp.init(np.arange(5.0, dtype=np.float32),
                                           JRotation.from_quat(q)))(QUATS)
    close(kiln.jit(lambda s, t: s(t).as_matrix())(slerp, np.float32(1.3)),
          jax.jit(lambda s, t: s(t).as_matrix())(jslerp, np.float32(1.3)))
    close(kiln.grad(lambda t: slerp(t).as_rotvec()[0])(np.float32(2.4)),
          jax.jit(jax.grad(lambda t: jslerp(t).as_rotvec()[0]))(np.float32(2.4)), 1e-4)


def test_errors_are_jaxs():
    one = Rotation.from_quat(QUATS[0])
    cases = [
        (TypeError, "Single rotation is not subscriptable", lambda: one[0]),
        (TypeError, r"Single rotation has no len\(\)", lambda: len(one)),
        (ValueError, "Expected axis specification to be a non-empty string of upto 3 "
                     "characters, got xyzx", lambda: Rotation.from_euler("xyzx", [1, 2, 3, 4])),
        (ValueError, "Expected axes from `seq` to be from", lambda: Rotation.from_euler("xYz", [1, 2, 3])),
        (ValueError, "Expected consecutive axes to be different, got xxy",
         lambda: Rotation.from_euler("xxy", [1, 2, 3])),
        (ValueError, "names 2 axes, so the last axis of `angles` must have 2 angles",
         lambda: Rotation.from_euler("xy", [1.0, 2.0, 3.0])),
        (ValueError, "Expected 3 axes, got xy.", lambda: one.as_euler("xy")),
        (ValueError, "Expected `weights` to be 1 dimensional",
         lambda: Rotation.from_quat(QUATS).mean(np.ones((5, 1)))),
        (ValueError, "got 4 values and 5 rotations", lambda: Rotation.from_quat(QUATS).mean(np.ones(4))),
        (NotImplementedError, "Rotation.random is not implemented",
         lambda: Rotation.random(kiln.random.key(0), 3)),
        (AssertionError, "num must be None", lambda: Rotation.identity(3)),
        (TypeError, "`rotations` must be a `Rotation` instance", lambda: Slerp.init([0, 1], QUATS)),
        (ValueError, "at least 2 rotations", lambda: Slerp.init([0], Rotation.from_quat(QUATS[:1]))),
        (ValueError, "got 5 rotations and 3 timestamps",
         lambda: Slerp.init([0, 1, 2], Rotation.from_quat(QUATS))),
        (ValueError, "`times` must be at most 1-dimensional",
         lambda: Slerp.init(np.arange(5), Rotation.from_quat(QUATS))(np.ones((2, 2)))),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()
    # JAX raises the same types for the same calls
    for error, call in [(TypeError, lambda: JRotation.from_quat(QUATS[0])[0]),
                        (ValueError, lambda: JRotation.from_euler("xxy", np.ones(3))),
                        (ValueError, lambda: JRotation.from_quat(QUATS[0]).as_euler("xy")),
                        (NotImplementedError, lambda: JRotation.random(jax.random.key(0), 3)),
                        (AssertionError, lambda: JRotation.identity(3))]:
        with pytest.raises(error):
            call()
