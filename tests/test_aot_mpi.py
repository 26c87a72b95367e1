"""Ahead-of-time libraries whose functions call collectives across processes (docs/aot.md).

A function with a pmap whose psum/pmean spans two MPI processes is compiled with
`processes=2` (`kiln compile --processes 2`); the library links the MPI engine's code and
exports `<NAME>_mpi_setup`. A C program built with mpicc and a Python program through
`kiln.aot.load` each run it under `mpirun -np 2` and print both ranks' results, checked
against NumPy. The refusals (code depending on the process index; loading outside such a run)
are checked in this process. Skipped only when mpi4py, mpirun or mpicc is missing.
"""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
from kiln import lax
import kiln.numpy as jnp
from kiln.compiler.backends import mpi_engine
from kiln.aot import AOTLoadError
from kiln.cli.aot import compile_library
from kiln.compiler.aot import AOTError, Target
from kiln.compiler.aot.manifest import MPI_SETUP_LATE

from test_distributed import launch, needs_mpi

MPICC = shutil.which("mpicc", path=os.path.dirname(sys.executable)) or shutil.which("mpicc")
pytestmark = [needs_mpi, pytest.mark.skipif(MPICC is None, reason="mpicc is not installed")]
# replicas per process, values per replica: the psum's buffer is above the size from which two
# processes on one machine reduce through their shared window (the glue sets it up)
LOCAL, N = 2, mpi_engine.SHARED_BYTES // 4 + 3


def total(x):
    """Every replica's x * 2 summed over the 2 local replicas of both processes."""
    return kiln.pmap(lambda v: lax.psum(v * 2.0, "i"), axis_name="i")(x)


def mean_square(x):
    return kiln.pmap(lambda v: lax.pmean(jnp.sum(v * v), "i"), axis_name="i")(x)


def shifted(x):
    return kiln.pmap(lambda v: v + lax.axis_index("i"), axis_name="i")(x)


def local_batch(rank):
    return (rank * 100 + np.arange(LOCAL * N, dtype=np.float32)).reshape(LOCAL, N)


def expected():
    both = np.stack([local_batch(0), local_batch(1)])          # [process, replica, n]
    summed = (both * 2).sum(axis=(0, 1))
    return np.broadcast_to(summed, (LOCAL, N)), np.full(LOCAL, (both ** 2).sum(-1).mean())


MAIN = r"""
#include <stdio.h>
#include "dp.h"

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float x[LOCAL * N], sums[LOCAL * N], means[LOCAL];
    for (int i = 0; i < LOCAL * N; i++) x[i] = (float)(rank * 100 + i);
    int early = dp_total(x, sums);
    int wrong = dp_mpi_setup(MPI_COMM_SELF, 30.0);
    int setup = dp_mpi_setup(MPI_COMM_WORLD, 30.0);
    int a = dp_total(x, sums), b = dp_mean_square(x, means);
    printf("rank %d codes %d %d %d %d %d values", rank, early, wrong, setup, a, b);
    for (int i = 0; i < LOCAL * N; i++) printf(" %.9g", sums[i]);
    for (int i = 0; i < LOCAL; i++) printf(" %.9g", means[i]);
    printf("\n");
    int down = dp_mpi_teardown();
    MPI_Finalize();
    return down;
}
"""

LOADER = """
import sys
import numpy as np
import kiln, kiln.aot
kiln.distributed.initialize()
rank = kiln.process_index()
lib = kiln.aot.load(sys.argv[1])
x = (rank * 100 + np.arange({size}, dtype=np.float32)).reshape({local}, {n})
values = [np.asarray(lib.total(x)).ravel(), np.asarray(lib.mean_square(x)).ravel()]
print("rank", rank, "values", *[f"{{v:.9g}}" for v in np.concatenate(values)])
kiln.distributed.shutdown()
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    out = tmp_path_factory.mktemp("aot_mpi") / "dp"
    x = np.zeros((LOCAL, N), np.float32)
    manifest = compile_library([Target(total, (x,)), Target(mean_square, (x,))], out,
                               name="dp", processes=2)
    assert manifest["processes"] == 2
    assert [f["uses"] for f in manifest["functions"]] == [["mpi"], ["mpi"]]
    return out


def ranks(output, expected_codes=None):
    """{rank: (codes, values)} from the programs' lines."""
    found = {}
    for line in output.splitlines():
        if line.startswith("rank "):
            words = line.split()
            at = words.index("values")
            found[int(words[1])] = ([int(w) for w in words[3:at]],
                                    np.array(words[at + 1:], dtype=np.float32))
    assert sorted(found) == [0, 1], output
    return found


def check_values(values):
    sums, means = expected()
    np.testing.assert_allclose(values[:LOCAL * N], sums.ravel(), rtol=1e-6)
    np.testing.assert_allclose(values[LOCAL * N:], means, rtol=1e-6)


def test_c_program_on_two_processes(library, tmp_path):
    source = tmp_path / "main.c"
    source.write_text(MAIN)
    program = tmp_path / "main"
    subprocess.run([MPICC, f"-DLOCAL={LOCAL}", f"-DN={N}", "-Wall", "-Werror", "-O2",
                    f"-I{library}", str(source), f"-L{library}", "-ldp",
                    f"-Wl,-rpath,{library}", "-o", str(program)],
                   check=True, capture_output=True, text=True)
    rc, output, _ = launch([str(program)], limit=60)
    assert rc == 0, output
    for rank, (codes, values) in ranks(output).items():
        # before setup: 4; a communicator of 1 process for a library of 2: 13
        assert codes == [4, 13, 0, 0, 0], (rank, output)
        check_values(values)


LATE_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include "dp.h"

int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 1)   /* this process skips the shared window: the other waits for it in vain */
        setenv("KILN_DISTRIBUTED_SHARED_MEMORY", "0", 1);
    double start = MPI_Wtime();
    int setup = dp_mpi_setup(MPI_COMM_WORLD, 2.0);
    printf("rank %d setup %d after %.0f s: %s\n", rank, setup, MPI_Wtime() - start,
           dp_strerror(setup));
    fflush(stdout);
    if (setup) MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Barrier(MPI_COMM_WORLD);   /* (until the job is aborted) */
    return 0;
}
"""


def test_c_program_whose_peer_never_sets_up_the_window(library, tmp_path):
    """<NAME>_mpi_setup waits for the other processes at the shared window with the timeout it
    is given: a process that never comes gives MPI_SETUP_LATE, not a hang."""
    source = tmp_path / "late.c"
    source.write_text(LATE_MAIN)
    program = tmp_path / "late"
    subprocess.run([MPICC, "-Wall", "-Werror", "-O2", f"-I{library}", str(source),
                    f"-L{library}", "-ldp", f"-Wl,-rpath,{library}", "-o", str(program)],
                   check=True, capture_output=True, text=True)
    rc, output, seconds = launch([str(program)], limit=60)
    assert rc != 0, output
    assert (f"rank 0 setup {MPI_SETUP_LATE} after 2 s: dp_mpi_setup: another process of the "
            f"communicator did not call dp_mpi_setup within the timeout") in output, output
    assert seconds < 40, (seconds, output)


def test_python_program_loads_it_on_two_processes(library, tmp_path):
    script = tmp_path / "load.py"
    script.write_text(textwrap.dedent(LOADER.format(size=LOCAL * N, local=LOCAL, n=N)))
    rc, output, _ = launch([sys.executable, str(script), str(library)], limit=90)
    assert rc == 0, output
    for rank, (_, values) in ranks(output).items():
        check_values(values)


def test_loading_outside_a_run_of_two_processes(library):
    with pytest.raises(AOTLoadError, match=r"across 2 processes: load it in each process of "
                                           r"an `mpirun -np 2` run"):
        kiln.aot.load(library)


def test_code_depending_on_the_process_index_is_refused(tmp_path):
    with pytest.raises(AOTError, match="depends on the process index .* one library serves "
                                       "every process"):
        compile_library([Target(shifted, (np.zeros((LOCAL, N), np.float32),))],
                        tmp_path / "x", name="x", processes=2)
