"""numpyro on whatever `import jax` gives (kiln under KILN_AS_JAX=1, else JAX): a linear
regression sampled with NUTS and HMC, fitted with SVI and an AutoNormal guide (numpyro.optim
with Trace_ELBO, optax with TraceGraph_ELBO), Predictive, log_density, provenance
(get_dependencies, get_model_relations), and samples and log densities of a few
distributions. Prints the values as JSON, for tests/test_compat_numpyro.py."""
import json
import sys
import time

import numpy as np
import jax
import jax.numpy as jnp
from jax import random
import optax
import numpyro
import numpyro.distributions as dist
import numpyro.optim
from numpyro.infer import HMC, MCMC, NUTS, SVI, Predictive, Trace_ELBO, TraceGraph_ELBO
from numpyro.infer.autoguide import AutoNormal
from numpyro.infer.inspect import get_dependencies, get_model_relations
from numpyro.infer.util import log_density
from numpyro.ops.provenance import eval_provenance


def model(x, y=None):
    a = numpyro.sample("a", dist.Normal(0., 1.))
    b = numpyro.sample("b", dist.Normal(0., 1.))
    s = numpyro.sample("s", dist.HalfNormal(1.))
    with numpyro.plate("N", x.shape[0]):
        mu = numpyro.deterministic("mu", a + b * x)
        numpyro.sample("y", dist.Normal(mu, s), obs=y)


def draw_from_distributions(key):
    """Three draws of each distribution and their log densities (jitted: one compilation)."""
    out = {}
    for name, d in {"Normal": dist.Normal(jnp.array([0., 1.]), 2.),
                    "HalfNormal": dist.HalfNormal(1.5),
                    "Bernoulli": dist.Bernoulli(probs=0.3),
                    "Categorical": dist.Categorical(probs=jnp.array([.2, .5, .3])),
                    "Dirichlet": dist.Dirichlet(jnp.array([1., 2., 3.])),
                    "MultivariateNormal": dist.MultivariateNormal(
                        jnp.zeros(2), jnp.array([[2., .5], [.5, 1.]]))}.items():
        draws = d.sample(key, (3,))
        out[name] = (draws, d.log_prob(draws))
    return out


def values(v):
    return np.asarray(v, np.float64).tolist()


def main():
    out, times = {"jax_is": jax.__name__}, {}
    x = jnp.linspace(-1., 1., 12)
    y = 0.5 + 2. * x + 0.1 * jnp.sin(7 * x)

    t = time.time()
    out["provenance"] = sorted(eval_provenance(lambda x, y, z: x * y + 1., x=1., y=2., z=3.))
    deps = get_dependencies(model, model_args=(x, y))
    out["dependencies"] = {kind: {site: sorted(on) for site, on in table.items()}
                           for kind, table in deps.items()}
    relations = get_model_relations(model, model_args=(x, y))
    out["relations"] = {kind: ({k: sorted(v) for k, v in table.items()}
                               if isinstance(table, dict) else sorted(table))
                        for kind, table in relations.items() if kind != "sample_dist"}
    out["log_density"] = float(log_density(model, (x, y), {}, {"a": .3, "b": 1.2, "s": .7})[0])
    times["inspect"] = time.time() - t

    t = time.time()
    nuts = MCMC(NUTS(model), num_warmup=10, num_samples=6, progress_bar=False)
    nuts.run(random.PRNGKey(0), x, y, extra_fields=("num_steps",))
    samples = nuts.get_samples()
    out["nuts"] = {k: values(samples[k]) for k in ("a", "b", "s")}
    out["nuts_steps"] = np.asarray(nuts.get_extra_fields()["num_steps"]).tolist()
    hmc = MCMC(HMC(model, num_steps=4, trajectory_length=None), num_warmup=10, num_samples=5,
               progress_bar=False)
    hmc.run(random.PRNGKey(1), x, y)
    out["hmc"] = {k: values(v) for k, v in sorted(hmc.get_samples().items()) if k != "mu"}
    times["mcmc"] = time.time() - t

    t = time.time()
    guide = AutoNormal(model)
    fit = SVI(model, guide, numpyro.optim.Adam(0.05), Trace_ELBO()).run(
        random.PRNGKey(2), 15, x, y, progress_bar=False)
    out["svi_losses"] = values(fit.losses)
    out["svi_params"] = {k: values(v) for k, v in sorted(fit.params.items())}
    fit2 = SVI(model, AutoNormal(model), optax.adam(0.05), TraceGraph_ELBO()).run(
        random.PRNGKey(3), 5, x, y, progress_bar=False)
    out["svi_optax_losses"] = values(fit2.losses)
    times["svi"] = time.time() - t

    t = time.time()
    out["predictive_posterior"] = values(Predictive(model, samples, return_sites=["y"])(
        random.PRNGKey(4), x)["y"])
    out["predictive_guide"] = values(Predictive(model, guide=guide, params=fit.params,
                                                num_samples=3)(random.PRNGKey(5), x)["y"])
    out["predictive_prior"] = values(Predictive(model, num_samples=4)(random.PRNGKey(6), x)["a"])
    for name, (draws, log_p) in jax.jit(draw_from_distributions)(random.PRNGKey(7)).items():
        out["dist_" + name] = [values(draws), values(log_p)]
    times["predictive_distributions"] = time.time() - t
    print(json.dumps(times), file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
