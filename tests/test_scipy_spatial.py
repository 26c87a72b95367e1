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


def test_conversions_match_jax():
    ours, theirs = Rotation.from_quat(QUATS), JRotation.from_quat(QUATS)
    close(ours.quat, theirs.quat)
    for method in ("as_matrix", "as_rotvec", "as_mrp", "magnitude"):
        close(getattr(ours, method)(), getattr(theirs, method)())
    close(ours.as_rotvec(degrees=True), theirs.as_rotvec(degrees=True), 1e-3)
    for canonical in (False, True):
        for scalar_first in (False, True):
            close(ours.as_quat(canonical, scalar_first), theirs.as_quat(canonical, scalar_first))
    close(Rotation.from_matrix(theirs.as_matrix()).quat, JRotation.from_matrix(theirs.as_matrix()).quat)
    close(Rotation.from_rotvec(theirs.as_rotvec()).quat, JRotation.from_rotvec(theirs.as_rotvec()).quat)
    close(Rotation.from_rotvec(np.zeros(3, np.float32)).quat, JRotation.from_rotvec(np.zeros(3, np.float32)).quat)
    close(Rotation.from_rotvec(theirs.as_rotvec(True), degrees=True).quat,
          JRotation.from_rotvec(theirs.as_rotvec(True), degrees=True).quat)
    close(Rotation.from_mrp(theirs.as_mrp()).quat, JRotation.from_mrp(theirs.as_mrp()).quat)
    close(Rotation.identity().quat, JRotation.identity().quat)
    close(Rotation.identity(dtype=np.float16).quat, JRotation.identity(dtype=np.float16).quat)


@pytest.mark.parametrize("seq", SEQS)
def test_euler_angles_match_jax(seq):
    angles = RNG.uniform(-3, 3, (4, len(seq))).astype(np.float32)
    close(Rotation.from_euler(seq, angles).quat, JRotation.from_euler(seq, angles).quat)
    close(Rotation.from_euler(seq, np.rad2deg(angles), degrees=True).quat,
          JRotation.from_euler(seq, np.rad2deg(angles), degrees=True).quat)
    if len(seq) == 3:
        ours, theirs = Rotation.from_quat(QUATS), JRotation.from_quat(QUATS)
        close(ours.as_euler(seq), theirs.as_euler(seq))
        close(ours.as_euler(seq, degrees=True), theirs.as_euler(seq, degrees=True), 1e-3)
        # a middle angle of 0: the degenerate case puts the whole turn in one outer angle
        flat = JRotation.from_euler(seq, np.array([0.3, 1e-9, 0.2], np.float32))
        close(Rotation(np.asarray(flat.quat)).as_euler(seq), flat.as_euler(seq))


def test_composition_application_mean_and_indexing_match_jax():
    ours, theirs = Rotation.from_quat(QUATS), JRotation.from_quat(QUATS)
    close((ours * ours[::-1]).quat, (theirs * theirs[::-1]).quat)
    close((ours[1] * ours).quat, (theirs[1] * theirs).quat)
    close(ours.inv().quat, theirs.inv().quat)
    vectors = RNG.normal(size=(5, 3)).astype(np.float32)
    for inverse in (False, True):
        close(ours.apply(vectors, inverse), theirs.apply(vectors, inverse))
        close(ours.apply(vectors[0], inverse), theirs.apply(vectors[0], inverse))
        close(ours[2].apply(vectors, inverse), theirs[2].apply(vectors, inverse))
    weights = np.arange(1.0, 6.0, dtype=np.float32)
    # the eigenvector's sign is arbitrary; the rotation is not
    close(ours.mean().as_matrix(), theirs.mean().as_matrix(), 1e-4)
    close(ours.mean(weights).as_matrix(), theirs.mean(weights).as_matrix(), 1e-4)
    assert len(ours) == 5 and ours[1:3].quat.shape == (2, 4) and ours[0].single
    close(Rotation.concatenate([ours, ours[:2]]).quat, JRotation.concatenate([theirs, theirs[:2]]).quat)


def test_slerp_matches_jax():
    times = np.array([0.0, 1.0, 2.5, 3.0, 4.0], np.float32)
    ours = Slerp.init(times, Rotation.from_quat(QUATS))
    theirs = JSlerp.init(times, JRotation.from_quat(QUATS))
    queries = np.array([-0.5, 0.2, 1.7, 3.0, 3.9, 5.0], np.float32)
    close(ours(queries).quat, theirs(queries).quat)
    assert ours(1.3).single
    close(ours(1.3).quat, theirs(1.3).quat)


def test_transforms_match_jax():
    angles = RNG.uniform(-1, 1, (3, 3)).astype(np.float32)

    def euler_roundtrip(module, a):
        return module.from_euler("XYZ", a).as_euler("zxz").sum()

    close(kiln.jit(lambda r: r.as_euler("xyz"))(Rotation.from_quat(QUATS)),
          JRotation.from_quat(QUATS).as_euler("xyz"))
    # a Rotation in and out of jit, and through vmap, as a pytree
    got = kiln.jit(lambda r, q: r * Rotation.from_quat(q))(Rotation.from_quat(QUATS[0]), QUATS)
    assert isinstance(got, Rotation)
    close(got.quat, (JRotation.from_quat(QUATS[0]) * JRotation.from_quat(QUATS)).quat)
    close(kiln.vmap(lambda q: Rotation.from_quat(q).as_rotvec())(QUATS),
          jax.vmap(lambda q: JRotation.from_quat(q).as_rotvec())(QUATS))
    close(kiln.grad(lambda a: euler_roundtrip(Rotation, a))(angles),
          jax.grad(lambda a: euler_roundtrip(JRotation, a))(angles), 1e-4)
    slerp = Slerp.init(np.arange(5.0, dtype=np.float32), Rotation.from_quat(QUATS))
    jslerp = JSlerp.init(np.arange(5.0, dtype=np.float32), JRotation.from_quat(QUATS))
    close(kiln.jit(lambda s, t: s(t).as_matrix())(slerp, np.float32(1.3)),
          jslerp(np.float32(1.3)).as_matrix())
    close(kiln.grad(lambda t: slerp(t).as_rotvec()[0])(np.float32(2.4)),
          jax.grad(lambda t: jslerp(t).as_rotvec()[0])(np.float32(2.4)), 1e-4)


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
