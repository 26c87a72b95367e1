"""A variational autoencoder with `kiln.example_libraries.stax`, in the style of JAX's
mnist_vae example, on synthetic binary images (made here, no download).

    python samples/vae.py [--steps 300] [--batch 64]

The images are 8x8 binary patterns: each is one of 6 fixed templates with a few pixels
flipped. The encoder maps an image to the mean and variance of a 2-dimensional Gaussian
(stax's FanOut and parallel), a latent sample is drawn with the reparameterisation trick
(`kiln.random.normal`), and the decoder gives Bernoulli logits for every pixel. Training
maximises the evidence lower bound (ELBO): the images' log-likelihood minus the KL divergence
of the latent distribution from the standard normal, with adam, under `kiln.jit`. The script
prints the ELBO of the whole set before and after training, and how often a reconstruction
has the template of its image.
"""
import argparse

import numpy as np

import kiln
import kiln.numpy as jnp
from kiln import random
from kiln.example_libraries import optimizers, stax

PIXELS, TEMPLATES, LATENT = 64, 6, 2


def images(seed, n):
    """`n` binary images f32[n, 64] and the index of each one's template."""
    rng = np.random.default_rng(seed)
    templates = np.random.default_rng(7).random((TEMPLATES, PIXELS)) > 0.5
    which = rng.integers(0, TEMPLATES, n)
    flips = rng.random((n, PIXELS)) < 0.03
    return (templates[which] ^ flips).astype(np.float32), which, templates.astype(np.float32)


encoder_init, encode = stax.serial(
    stax.Dense(64), stax.Softplus, stax.FanOut(2),
    stax.parallel(stax.Dense(LATENT), stax.serial(stax.Dense(LATENT), stax.Softplus)))
decoder_init, decode = stax.serial(stax.Dense(64), stax.Softplus, stax.Dense(PIXELS))


def gaussian_kl(mu, sigmasq):
    """KL(N(mu, sigmasq) || N(0, 1)), summed over the latent dimensions."""
    return -0.5 * jnp.sum(1.0 + jnp.log(sigmasq) - mu ** 2.0 - sigmasq, axis=-1)


def bernoulli_logpdf(logits, x):
    """log p(x | logits) of independent Bernoulli pixels, summed over the pixels."""
    return -jnp.sum(jnp.logaddexp(0.0, jnp.where(x > 0.5, -1.0, 1.0) * logits), axis=-1)


def elbo(rng, params, x):
    """The mean ELBO of the batch `x` with one latent sample per image."""
    enc_params, dec_params = params
    mu, sigmasq = encode(enc_params, x)
    z = mu + jnp.sqrt(sigmasq) * random.normal(rng, mu.shape)
    logits = decode(dec_params, z)
    return jnp.mean(bernoulli_logpdf(logits, x) - gaussian_kl(mu, sigmasq))


def reconstruct(params, x):
    """The decoder's pixel probabilities at the mean of each image's latent distribution."""
    enc_params, dec_params = params
    mu, _ = encode(enc_params, x)
    return kiln.nn.sigmoid(decode(dec_params, mu))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--examples", type=int, default=512)
    args = parser.parse_args(argv)

    data, which, templates = images(0, args.examples)
    key = random.key(0)
    key, enc_key, dec_key = random.split(key, 3)
    _, enc_params = encoder_init(enc_key, (-1, PIXELS))
    _, dec_params = decoder_init(dec_key, (-1, LATENT))
    opt_init, opt_update, get_params = optimizers.adam(1e-2)
    state = opt_init((enc_params, dec_params))

    @kiln.jit
    def step(i, state, rng, x):
        grads = kiln.grad(lambda p: -elbo(rng, p, x))(get_params(state))
        return opt_update(i, grads, state)

    score = kiln.jit(elbo)
    before = float(score(random.key(1), get_params(state), data))
    rng = np.random.default_rng(1)
    for i in range(args.steps):
        key, sample_key = random.split(key)
        batch = data[rng.integers(0, args.examples, args.batch)]
        state = step(i, state, sample_key, batch)
    params = get_params(state)
    after = float(score(random.key(1), params, data))
    probs = np.asarray(kiln.jit(reconstruct)(params, data))
    nearest = np.argmin(np.abs(probs[:, None, :] - templates[None]).sum(-1), axis=1)
    print(f"elbo {before:.2f} -> {after:.2f} after {args.steps} steps")
    print(f"reconstructions with their image's template: {np.mean(nearest == which):.3f}")


if __name__ == "__main__":
    main()
