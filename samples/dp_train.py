"""Data-parallel training with `kiln.pmap`: the batch split over the CPU devices, each device
computing the gradients of its share, `lax.pmean` averaging them, and every device applying
the same SGD update, so the parameters stay replicated.

    python samples/dp_train.py [--devices 2] [--steps 100]
    mpirun -np 2 python samples/dp_train.py --devices 1     # two processes, one device each

The model and data are train_mlp.py's (an MLP on two spirals), in float64 (`jax_enable_x64`).
At the end the script trains the same model on one device with the whole batch and prints how
far the two parameter sets are apart: data-parallel SGD with averaged gradients is the same
computation, so they agree to rounding (in float32 the differences grow over the steps to about
1e-3, as they would between any two orders of summation).
"""
import argparse
import os
import sys

import numpy as np

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.5)
    args = parser.parse_args(argv)
    kiln.config.update("jax_num_cpu_devices", args.devices)
    kiln.config.update("jax_enable_x64", True)
    kiln.distributed.initialize()   # under mpirun: joins the other processes; else one process

    from kiln import lax, random
    from kiln.tree_util import tree_map
    from train_mlp import spirals, init_params, loss, accuracy

    n, local = kiln.device_count(), kiln.local_device_count()   # every process's, this one's
    data_key, init_key = random.split(random.PRNGKey(0))
    x, labels = spirals(data_key)
    params = init_params(init_key)

    def sgd(params, grads):
        return tree_map(lambda p, g: p - args.lr * g, params, grads)

    def dp_step(params, x, labels):
        value, grads = kiln.value_and_grad(loss)(params, x, labels)
        grads = lax.pmean(grads, "batch")         # the mean over the devices' shares
        return lax.pmean(value, "batch"), sgd(params, grads)
    dp_step = kiln.pmap(dp_step, axis_name="batch", in_axes=(None, 0, 0), out_axes=(0, None))

    # split the batch: [devices, per device, ...]; this process takes its devices' shares
    mine = slice(kiln.process_index() * local, (kiln.process_index() + 1) * local)
    xs = np.asarray(x).reshape(n, -1, x.shape[1])[mine]
    ls = np.asarray(labels).reshape(n, -1)[mine]
    replicated = params
    for i in range(args.steps):
        values, replicated = dp_step(replicated, xs, ls)
        if i == 0:
            first = float(values[0])
    print(f"{n} devices: loss {first:.3f} -> {float(values[0]):.3f} after {args.steps} steps; "
          f"accuracy {float(accuracy(replicated, x, labels)):.2f}")

    @kiln.jit
    def step(params, x, labels):
        return sgd(params, kiln.grad(loss)(params, x, labels))
    single = params
    for i in range(args.steps):
        single = step(single, x, labels)
    gap = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
              for a, b in zip(kiln.tree_util.tree_leaves(replicated),
                              kiln.tree_util.tree_leaves(single)))
    print(f"largest difference from one device on the whole batch: {gap:.2e}")
    kiln.distributed.shutdown()


if __name__ == "__main__":
    main()
