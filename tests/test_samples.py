"""Every program in samples/ runs and prints what it says (samples/aot_c is run by
test_aot_c.py, as `make aot-sample` builds it)."""
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def run(script, *args, cwd=None):
    out = subprocess.run([sys.executable, str(SAMPLES / script), *args], capture_output=True,
                         text=True, timeout=600, cwd=cwd)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_quickstart():
    out = run("quickstart.py")
    assert "x * 2 stays float32: float32" in out and "uniform:" in out


def test_mlp_loss():
    assert "loss" in run("mlp.py").lower()


def test_train_mlp_learns_and_plots_its_loss(tmp_path):
    png = tmp_path / "loss.png"
    out = run("train_mlp.py", "--steps", "150", "--out", str(png))
    first, last = map(float, out.split("loss ")[1].split(" after")[0].split(" -> "))
    assert last < first / 4, out
    assert float(out.split("accuracy ")[1].split()[0]) > 0.9, out
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (640, 360)
    # the IDAT stream inflates to one filter byte and width RGB pixels per row
    start = data.index(b"IDAT") + 4
    length = struct.unpack(">I", data[start - 8:start - 4])[0]
    assert len(zlib.decompress(data[start:start + length])) == height * (1 + 3 * width)


def test_per_example_gradients():
    out = run("per_example_grads.py")
    assert "per-example gradients: (8, 5)" in out and "clipped mean gradient" in out


def test_python_control_flow():
    out = run("python_control_flow.py")
    assert "collatz steps of 27: 111" in out
    assert "for 1..10: [0, 1, 7, 2, 5, 8, 16, 3, 19, 6]" in out
    assert "vmapped over an array: [ 0  1  7  2  5  8 16  3 19  6]" in out
    assert "d/da sqrt(a) at 2 = 0.353553" in out


def test_every_sample_is_tested():
    tested = {"quickstart.py", "mlp.py", "train_mlp.py", "per_example_grads.py",
              "python_control_flow.py", "png.py",   # png.py: train_mlp's plotting helper
              "pmap_basics.py", "dp_train.py", "mnist_cnn.py", "vae.py", "dp_sgd.py",
              "gp_regression.py", "ilqr.py"}
    assert {p.name for p in SAMPLES.glob("*.py")} == tested
    assert os.path.isdir(SAMPLES / "aot_c")


def test_mnist_cnn_reaches_95_percent_train_accuracy():
    out = run("mnist_cnn.py")
    first, last = map(float, out.split("loss ")[1].split(" after")[0].split(" -> "))
    assert last < first / 4, out
    assert float(out.split("train accuracy ")[1].split()[0]) > 0.95, out


def test_vae_raises_the_elbo_and_reconstructs():
    out = run("vae.py", "--steps", "200")
    before, after = map(float, out.split("elbo ")[1].split(" after")[0].split(" -> "))
    assert after > before + 20 and after > -25, out
    assert float(out.split("template: ")[1]) > 0.9, out


def test_dp_sgd_learns_with_clipped_noised_gradients():
    out = run("dp_sgd.py", "--steps", "150")
    first, last = map(float, out.split("loss ")[1].split(" after")[0].split(" -> "))
    assert last < 0.8 * first, out
    assert float(out.split("train accuracy ")[1].split()[0]) > 0.85, out
    norm = float(out.split("norm ")[1].split()[0])
    assert 0.5 < norm <= 1.0 + 1e-5, out


def test_pmap_basics_prints_the_seed_values():
    out = run("pmap_basics.py").splitlines()
    assert out[-1] == "[0.         0.16666667 0.33333334 0.5       ]"
    assert len(out[0].strip("[]").split()) + len(out[1].strip("[]").split()) == 8


@pytest.mark.parametrize("devices", [1, 2, 4])
def test_data_parallel_training_matches_one_device(devices):
    out = run("dp_train.py", "--devices", str(devices), "--steps", "60")
    first, last = map(float, out.split("loss ")[1].split(" after")[0].split(" -> "))
    assert last < first, out
    assert float(out.split("batch: ")[1]) < 1e-9, out


def test_data_parallel_training_on_two_processes():
    import shutil
    mpirun = shutil.which("mpirun", path=os.path.dirname(sys.executable))
    if mpirun is None:
        pytest.skip("mpirun is not installed (pip install 'kiln[mpi]'; make test installs it)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
    command = [mpirun, "-np", "2", "--oversubscribe"] + \
        (["--allow-run-as-root"] if os.geteuid() == 0 else []) + \
        [sys.executable, str(SAMPLES / "dp_train.py"), "--devices", "1", "--steps", "30"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    gaps = [float(line.split("batch: ")[1]) for line in out.stdout.splitlines()
            if "batch: " in line]
    assert len(gaps) == 2 and max(gaps) < 1e-9, out.stdout


def _sample_module(name):
    import importlib
    sys.path.insert(0, str(SAMPLES))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(SAMPLES))


def test_gp_regression_matches_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy
    import jax.scipy.linalg
    import kiln
    import kiln.numpy
    import kiln.scipy.linalg
    gp_regression = _sample_module("gp_regression")
    got = gp_regression.run(kiln, kiln.numpy, kiln.scipy.linalg, steps=30)
    want = gp_regression.run(jax, jax.numpy, jax.scipy.linalg, steps=30)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3)
    assert "posterior mean:" in run("gp_regression.py")


def test_ilqr_matches_jax_and_lowers_the_cost():
    jax = pytest.importorskip("jax")
    import jax.numpy
    import kiln
    import kiln.numpy
    ilqr = _sample_module("ilqr")
    got = ilqr.run(kiln, kiln.numpy, iterations=2, warmup=2)
    want = ilqr.run(jax, jax.numpy, iterations=2, warmup=2)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3)
    assert got[1][-1] < got[1][0] / 2
    assert "cost per iteration:" in run("ilqr.py")
