"""Small functions of the patterns real training steps use, for ``benchmarks/pattern_sweep.py``.

Each takes one ``(4, 8)`` f32 array (its values are what the sweep multiplies by a power of
two) and returns an array; constants are drawn once from a fixed seed. They are what a model's
step is made of (routing, scans, optimizers, normalizations, masks), not whole models: each is
small enough to compile in a second, so that all of them run at several value scales and data
types.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

_RNG = np.random.default_rng(1)
W = (_RNG.normal(size=(8, 8)) * 0.3).astype(np.float32)
ROUTER = (_RNG.normal(size=(8, 4)) * 0.5).astype(np.float32)
EXPERTS = (_RNG.normal(size=(4, 8, 8)) * 0.3).astype(np.float32)
KERNEL = (_RNG.normal(size=(3, 3, 1, 3)) * 0.3).astype(np.float32)
IDS = _RNG.integers(0, 8, size=(4,)).astype(np.int32)
W2 = (_RNG.normal(size=(8, 8)) * 0.3).astype(np.float32)
UNIFORM = _RNG.uniform(0.01, 0.99, size=(4, 8)).astype(np.float32)


def moe_top2(x: jax.Array) -> jax.Array:
    """Gradient through top-2 routing, a softmax over the chosen logits, one-hot dispatch."""
    def loss(z: jax.Array) -> jax.Array:
        values, chosen = jax.lax.top_k(z @ ROUTER, 2)
        gates = jax.nn.softmax(values, -1)
        outputs = jnp.einsum("td,edf->tef", z, EXPERTS)
        combined = jnp.einsum("tke,tef,tk->tf", jax.nn.one_hot(chosen, 4), outputs, gates)
        return jnp.sum(combined ** 2)
    return jax.grad(loss)(x)


def online_softmax_scan(x: jax.Array) -> jax.Array:
    """Flash-attention's running max, sum and rescaled accumulator under ``lax.scan``."""
    query = x[0]

    def body(carry: tuple, keys: jax.Array) -> tuple:
        top, total, acc = carry
        scores = keys @ query
        new_top = jnp.maximum(top, jnp.max(scores))
        weights = jnp.exp(scores - new_top)
        correction = jnp.exp(top - new_top)
        return (new_top, total * correction + weights.sum(),
                acc * correction + weights @ keys), None

    (_, total, acc), _ = jax.lax.scan(body, (-jnp.inf, 0.0, jnp.zeros(8)), x.reshape(2, 2, 8))
    return acc / total


def adafactor(x: jax.Array) -> jax.Array:
    """A factored second moment (row and column means of g^2) and its rsqrt update."""
    g = jax.grad(lambda z: jnp.sum(jnp.tanh(z @ W) ** 2))(x)
    rows, columns = jnp.mean(g * g, 1), jnp.mean(g * g, 0)
    update = g * jax.lax.rsqrt(jnp.outer(rows, columns) / (jnp.mean(rows) + 1e-30) + 1e-30)
    update = update / jnp.maximum(1.0, jnp.sqrt(jnp.mean(update * update)))
    return x - 0.01 * update * jnp.sqrt(jnp.mean(x * x))


def lion(x: jax.Array) -> jax.Array:
    """Lion's sign of an interpolated momentum, the step sized by the weights."""
    g = jax.grad(lambda z: jnp.sum(z ** 2))(x)
    return x - 1e-3 * jnp.max(jnp.abs(x)) * jnp.sign(0.9 * 0.5 * x[::-1] + 0.1 * g)


def grad_accumulation_scan(x: jax.Array) -> jax.Array:
    """Gradients of two micro-batches summed under ``lax.scan``."""
    def body(acc: jax.Array, batch: jax.Array) -> tuple:
        g = jax.grad(lambda w: jnp.sum((batch @ w) ** 2))(W)
        return acc + g * jnp.max(jnp.abs(x)), None

    total, _ = jax.lax.scan(body, jnp.zeros_like(W), x.reshape(2, 2, 8))
    return total / 2


def cumulative_ssm(x: jax.Array) -> jax.Array:
    """State-space-style cumulative sums and products of gates."""
    gates = jax.nn.sigmoid(x / jnp.max(jnp.abs(x)))
    return jnp.cumsum(x, 1) + jnp.exp(jnp.cumsum(jnp.log(gates), 1)) * jnp.cumprod(gates, 0)


def linear_recurrence(x: jax.Array) -> jax.Array:
    """``h_t = a_t h_(t-1) + b_t`` by ``lax.associative_scan``."""
    decay = jax.nn.sigmoid(x[:2] / jnp.max(jnp.abs(x))).T

    def combine(left: tuple, right: tuple) -> tuple:
        return left[0] * right[0], right[0] * left[1] + right[1]

    return jax.lax.associative_scan(combine, (decay, x[2:].T))[1]


def depthwise_conv_grad(x: jax.Array) -> jax.Array:
    """The kernel gradient of a depthwise (grouped) convolution."""
    image = x.reshape(1, 4, 8, 1) * jnp.ones((1, 1, 1, 3))

    def loss(kernel: jax.Array) -> jax.Array:
        y = jax.lax.conv_general_dilated(image, kernel, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                         feature_group_count=3)
        return jnp.sum(y ** 2)

    return jax.grad(loss)(KERNEL * jnp.abs(x[0, 0]))


def label_smoothing(x: jax.Array) -> jax.Array:
    """The gradient of a label-smoothed cross-entropy, beside the log-probabilities."""
    target = 0.9 * jax.nn.one_hot(IDS, 8) + 0.1 / 8
    g = jax.grad(lambda z: -jnp.mean(jnp.sum(target * jax.nn.log_softmax(z), -1)))(x)
    return g + jax.nn.log_softmax(x)


def top_k_and_sort(x: jax.Array) -> jax.Array:
    values, _ = jax.lax.top_k(x, 3)
    return jnp.concatenate([values, jnp.sort(x, -1)[:, :2]], -1)


def masked_logsumexp(x: jax.Array) -> jax.Array:
    mask = jnp.arange(8)[None] <= jnp.arange(4)[:, None] * 2
    return jax.nn.logsumexp(jnp.where(mask, x, -jnp.inf), -1)


def causal_attention_grad(x: jax.Array) -> jax.Array:
    def loss(z: jax.Array) -> jax.Array:
        scores = z @ z.T / jnp.sqrt(8.0)
        weights = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((4, 4), bool)), scores, -jnp.inf))
        return jnp.sum((weights @ z) ** 2)
    return jax.grad(loss)(x)


def exact_gelu_grad(x: jax.Array) -> jax.Array:
    return jax.grad(lambda z: jnp.sum(jax.nn.gelu(z @ W, approximate=False)))(x)


def rmsnorm_grad(x: jax.Array) -> jax.Array:
    def loss(z: jax.Array) -> jax.Array:
        y = z * jax.lax.rsqrt(jnp.mean(z * z, -1, keepdims=True) + 1e-6)
        return jnp.sum((y @ W) ** 2)
    return jax.grad(loss)(x)


def kv_cache_loop(x: jax.Array) -> jax.Array:
    """Rows written one by one into a cache by ``fori_loop`` and ``dynamic_update_slice``."""
    def body(i: jax.Array, cache: jax.Array) -> jax.Array:
        return jax.lax.dynamic_update_slice(cache, x[i][None] * 2.0, (i, 0))
    return jax.lax.fori_loop(0, 4, body, jnp.zeros((4, 8)))


def segment_sum(x: jax.Array) -> jax.Array:
    return jax.ops.segment_sum(x, jnp.array([0, 1, 0, 2]), num_segments=3)


def layer_scale(x: jax.Array) -> jax.Array:
    """A residual branch scaled by a tiny initial factor."""
    return x + 1e-6 * (x @ W)


def cosine_similarity_grad(x: jax.Array) -> jax.Array:
    def loss(z: jax.Array) -> jax.Array:
        other = z[::-1]
        norms = jnp.linalg.norm(z, axis=-1) * jnp.linalg.norm(other, axis=-1)
        return jnp.sum(jnp.sum(z * other, -1) / (norms + 1e-8))
    return jax.grad(loss)(x)


def global_norm_clip(x: jax.Array) -> jax.Array:
    """``optax.clip_by_global_norm`` of a two-leaf gradient, and the norm itself."""
    grads = {"w": x, "b": x[0] * 0.5}
    clipped, _ = optax.clip_by_global_norm(1.0).update(grads, optax.EmptyState())
    return clipped["w"] + clipped["b"] + optax.tree.norm(grads)


def powers(x: jax.Array) -> jax.Array:
    return x ** 3 - jnp.abs(x) ** 2.5 + x ** 2


def clip_values(x: jax.Array) -> jax.Array:
    bound = 0.5 * jnp.max(jnp.abs(x))
    return jnp.clip(x, -bound, bound)


def sample_variances(x: jax.Array) -> jax.Array:
    return jnp.var(x, 0, ddof=1) + jnp.std(x, 1, ddof=1).sum()


def warmup_step(x: jax.Array) -> jax.Array:
    """A learning rate from an integer step count, as warmup schedules make it."""
    rate = jnp.minimum(jnp.int32(30) / 100, 1.0) * 3e-4
    return x - rate * jnp.sign(x) * jnp.abs(x)


def logaddexp_softplus(x: jax.Array) -> jax.Array:
    return jnp.logaddexp(x, x[::-1]) + jax.nn.softplus(x)


def elu_mish_grad(x: jax.Array) -> jax.Array:
    return jax.grad(lambda z: jnp.sum(jax.nn.elu(z) + z * jnp.tanh(jax.nn.softplus(z))))(x)


def polyak_average(x: jax.Array) -> jax.Array:
    return 0.995 * jax.lax.stop_gradient(x[::-1]) + 0.005 * x


def one_hot_embedding(x: jax.Array) -> jax.Array:
    return jax.nn.one_hot(IDS, 4) @ x


def large_mean(x: jax.Array) -> jax.Array:
    return jnp.mean(jnp.tile(x, (64, 16)) ** 2) + x


def rank_weights(x: jax.Array) -> jax.Array:
    return x * jnp.argsort(jnp.argsort(x, -1), -1).astype(jnp.float32)


def lamb_update(x: jax.Array) -> jax.Array:
    """``optax.lamb``'s first update of a gradient, jitted apart from any backward pass (its
    bias corrections ``1 - 0.999^t`` were 0 in bf16 data)."""
    tx = optax.lamb(1e-3, weight_decay=0.01)
    params = {"w": jnp.asarray(W[:4]), "b": jnp.asarray(W[4])}
    updates, _ = tx.update({"w": x, "b": x[0]}, tx.init(params), params)
    return updates["w"] + updates["b"]


def adam_scan(x: jax.Array) -> jax.Array:
    """Adam's bias-corrected ratio over four gradients under ``lax.scan``."""
    def step(carry: tuple, g: jax.Array) -> tuple:
        m, v, t = carry
        t = t + 1
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        corrected = (m / (1 - 0.9 ** t.astype(jnp.float32))) / (
            jnp.sqrt(v / (1 - 0.999 ** t.astype(jnp.float32))) + 1e-8)
        return (m, v, t), corrected

    _, updates = jax.lax.scan(step, (jnp.zeros(8), jnp.zeros(8), jnp.int32(0)), x)
    return updates


def fake_quant_ste(x: jax.Array) -> jax.Array:
    """Int8 fake quantization with a straight-through gradient, and the integer codes."""
    def quantize(z: jax.Array) -> jax.Array:
        step = jnp.max(jnp.abs(z)) / 127.0
        return z + jax.lax.stop_gradient(jnp.round(z / step) * step - z)
    codes = jnp.round(x / (jnp.max(jnp.abs(x)) / 127.0))
    return jax.grad(lambda z: jnp.sum((quantize(z) @ W) ** 2))(x) + codes


def contrastive_loss_grad(x: jax.Array) -> jax.Array:
    """CLIP's symmetric cross-entropy of normalized embeddings at a learned temperature."""
    def loss(z: jax.Array, log_scale: jax.Array) -> jax.Array:
        a = z / jnp.linalg.norm(z, axis=-1, keepdims=True)
        b = (z @ W) / jnp.linalg.norm(z @ W, axis=-1, keepdims=True)
        logits, labels = jnp.exp(log_scale) * a @ b.T, jnp.arange(4)
        return (optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
                + optax.softmax_cross_entropy_with_integer_labels(logits.T, labels).mean())
    g, g_scale = jax.grad(loss, (0, 1))(x, jnp.float32(np.log(1 / 0.07)))
    return g + g_scale


def spectral_norm(x: jax.Array) -> jax.Array:
    """The weight over its largest singular value from power iteration (``fori_loop``)."""
    def body(_: jax.Array, v: jax.Array) -> jax.Array:
        u = x @ v
        v = x.T @ (u / jnp.linalg.norm(u))
        return v / jnp.linalg.norm(v)
    v = jax.lax.fori_loop(0, 6, body, jnp.ones(8) / np.sqrt(8))
    return x / jnp.linalg.norm(x @ v)


def newton_sqrt_while(x: jax.Array) -> jax.Array:
    """A norm by Newton's iteration until it converges: a data-dependent trip count."""
    target = jnp.sum(x * x) + 1e-30

    def unconverged(carry: tuple) -> jax.Array:
        y, i = carry
        return (jnp.abs(y * y - target) > 1e-6 * target) & (i < 60)

    def newton(carry: tuple) -> tuple:
        y, i = carry
        return 0.5 * (y + target / y), i + 1

    root, _ = jax.lax.while_loop(unconverged, newton, (jnp.max(jnp.abs(x)), 0))
    return x / root


def skip_nonfinite_cond(x: jax.Array) -> jax.Array:
    """A step taken only where the gradient is finite (``lax.cond``, as loss scaling does)."""
    g = jax.grad(lambda z: jnp.sum(jnp.tanh(z @ W)))(x)
    return jax.lax.cond(jnp.all(jnp.isfinite(g)), lambda: x - 0.1 * g, lambda: x)


def per_example_clip(x: jax.Array) -> jax.Array:
    """DP-SGD: per-example gradients (``vmap`` of ``grad``), each clipped, averaged."""
    grads = jax.vmap(jax.grad(lambda row: jnp.sum(jnp.tanh(row @ W) ** 2)))(x)
    norms = jnp.linalg.norm(grads, axis=-1, keepdims=True)
    return jnp.mean(grads / jnp.maximum(1.0, norms / 0.5), 0)


def sharpness_aware_grad(x: jax.Array) -> jax.Array:
    """SAM: the gradient at the weights moved along the normalized gradient."""
    grad = jax.grad(lambda z: jnp.sum(jnp.tanh(z @ W) ** 2))
    g = grad(x)
    return grad(x + 0.05 * g / (jnp.linalg.norm(g) + 1e-12))


def entropy_grad(x: jax.Array) -> jax.Array:
    """A softmax's entropy by ``xlogy`` (0 log 0 = 0), and its gradient."""
    def entropy(z: jax.Array) -> jax.Array:
        p = jax.nn.softmax(z, -1)
        return -jnp.sum(jax.scipy.special.xlogy(p, p), -1)
    return entropy(x) + jax.grad(lambda z: jnp.sum(entropy(z)))(x).sum(-1)


def swiglu_grad(x: jax.Array) -> jax.Array:
    return jax.grad(lambda z: jnp.sum(((jax.nn.silu(z @ W) * (z @ W2)) @ W.T) ** 2))(x)


def cumulative_logsumexp(x: jax.Array) -> jax.Array:
    return jax.lax.cumlogsumexp(x, axis=1)


def weight_norm_grad(x: jax.Array) -> jax.Array:
    """Weight normalization, ``g * v / ||v||``, and the gradient through it."""
    gain = jnp.linspace(0.5, 1.5, 8)

    def normalized(v: jax.Array) -> jax.Array:
        return gain * v / jnp.linalg.norm(v, axis=0, keepdims=True)
    return normalized(x) + jax.grad(lambda v: jnp.sum(jnp.tanh(normalized(v) @ W)))(x)


def gumbel_softmax(x: jax.Array) -> jax.Array:
    """Logits plus Gumbel noise from fixed uniforms, at temperature 0.5."""
    return jax.nn.softmax((x - jnp.log(-jnp.log(UNIFORM))) / 0.5, -1)


def safe_distance_grad(x: jax.Array) -> jax.Array:
    """Pairwise distances with the double ``where`` that keeps sqrt's gradient at 0 finite."""
    def loss(z: jax.Array) -> jax.Array:
        squared = jnp.sum((z[:, None] - z[None]) ** 2, -1)
        positive = squared > 0
        return jnp.sum(jnp.where(positive, jnp.sqrt(jnp.where(positive, squared, 1.0)), 0.0))
    return jax.grad(loss)(x)


def fused_attention_grad(x: jax.Array) -> jax.Array:
    """``jax.nn.dot_product_attention`` with ``is_causal``: its mask is a sentinel far below
    scores that are themselves far below 1 at small input scales."""
    def loss(z: jax.Array) -> jax.Array:
        q, k = (z @ W).reshape(1, 4, 2, 4), (z @ W2).reshape(1, 4, 2, 4)
        out = jax.nn.dot_product_attention(q, k, z.reshape(1, 4, 2, 4), is_causal=True)
        return jnp.sum(out ** 2)
    return jax.grad(loss)(x)


_ALPHA_BAR = np.cumprod(1 - np.linspace(1e-4, 0.02, 1000)).astype(np.float32)
_TIMESTEPS = np.array([0, 3, 100, 999], np.int32)


def diffusion_noising(x: jax.Array) -> jax.Array:
    """A diffusion step's noised input from a schedule looked up per example (alpha_bar at
    t = 0 is 0.9999: its noise is 1% of the result), beside its min-SNR weight."""
    ab = jnp.asarray(_ALPHA_BAR)[_TIMESTEPS][:, None]
    return jnp.sqrt(ab) * x + jnp.sqrt(1 - ab) * x[::-1] + jnp.minimum(ab / (1 - ab), 5.0)


def scaled_square_moment(x: jax.Array) -> jax.Array:
    """Prodigy's second moment, ``(1 - b2) * d * d`` with ``d = lr * g``: a square written as
    a product of two tensors, and the update that divides by its root."""
    d = jnp.max(jnp.abs(x)) * 1e-3 * x
    nu = (1 - 0.999) * d * d
    return 0.1 * d / (jnp.sqrt(nu) + 1e-8 * jnp.max(jnp.abs(d)))


def z_loss_grad(x: jax.Array) -> jax.Array:
    """A cross-entropy with PaLM's z-loss, ``1e-4 * logsumexp(logits)^2``, and its gradient."""
    def loss(z: jax.Array) -> jax.Array:
        logits = z @ W
        lse = jax.nn.logsumexp(logits, -1)
        return (optax.softmax_cross_entropy_with_integer_labels(logits, IDS).mean()
                + 1e-4 * jnp.mean(lse ** 2))
    return jax.grad(loss)(x)


def inner_steps_momentum(x: jax.Array) -> jax.Array:
    """300 SGD steps with momentum in a ``fori_loop``, the gradient masked off after step 5:
    the momentum decays as ``0.9 * m + 0`` on every trip."""
    def step(i: jax.Array, state: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        w, m = state
        m = 0.9 * m + jnp.where(i < 5, jnp.tanh(w @ W), jnp.zeros_like(w))
        return w - 0.01 * m, m
    w, m = jax.lax.fori_loop(0, 300, step, (x, jnp.zeros_like(x)))
    return w + m


def incomplete_gamma(x: jax.Array) -> jax.Array:
    """``gammainc(|x| + 1, |x|)``: JAX's series and continued-fraction loops, which run until
    the next term is below 2^-23 of the sum (a condition on floats)."""
    return jax.scipy.special.gammainc(jnp.abs(x) + 1, jnp.abs(x))


def pseudo_inverse(x: jax.Array) -> jax.Array:
    """``jnp.linalg.pinv`` of a square block: LAPACK's SVD (an op without a rule), then the
    dot of its factors."""
    return jnp.linalg.pinv(x[:, :4])


def conjugate_gradient(x: jax.Array) -> jax.Array:
    """``jax.scipy.sparse.linalg.cg`` to a relative residual of 1e-6 on a system built from
    the input: a ``while`` whose condition reads the residual's dot products."""
    a = x.T @ x + 8.0 * jnp.eye(8) * jnp.mean(x * x)
    return jax.scipy.sparse.linalg.cg(a, jnp.sum(x, 0), tol=1e-6, maxiter=50)[0]


def schedule_in_step(x: jax.Array) -> jax.Array:
    """A diffusion schedule computed in the step, ``cumprod(1 - linspace(...))``, read at
    timesteps 0 to 999, and its min-SNR weight ``ab / (1 - ab)`` (near 1e4 at t = 0)."""
    ab = jnp.cumprod(1.0 - jnp.linspace(1e-4, 0.02, 1000))[jnp.array([0, 500, 990, 999])]
    ab = ab[:, None]
    return jnp.sqrt(ab) * x + jnp.sqrt(1 - ab) * x[::-1] + ab / (1 - ab) * jnp.mean(x)



# Drawn from a second generator, so that the constants above keep their values.
_RNG2 = np.random.default_rng(3)
NOISE = _RNG2.normal(size=(4, 8)).astype(np.float32)
DECODER = (_RNG2.normal(size=(4, 8)) * 0.3).astype(np.float32)


def scan_unrolled_ema(x: jax.Array) -> jax.Array:
    """A moving average over 64 steps under ``lax.scan(unroll=4)`` (four trips per loop trip),
    and the per-step sums it stacks."""
    def body(m: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
        m = 0.9 * m + 0.1 * x * jnp.cos(t)
        return m, m.sum()
    m, sums = jax.lax.scan(body, jnp.zeros_like(x), jnp.arange(64, dtype=jnp.float32), unroll=4)
    return jnp.concatenate([m.ravel(), sums])


def int8_matmul(x: jax.Array) -> jax.Array:
    """Symmetric int8 quantization by the max magnitude, an int8 x int8 -> int32 dot, and the
    dequantized product."""
    step = jnp.max(jnp.abs(x)) / 127.0 + 1e-30
    codes = jnp.clip(jnp.round(x / step), -127, 127).astype(jnp.int8)
    w_step = float(np.abs(W).max()) / 127.0
    w_codes = jnp.asarray(np.round(W / w_step).astype(np.int8))
    acc = jax.lax.dot_general(codes, w_codes, (((1,), (0,)), ((), ())),
                              preferred_element_type=jnp.int32)
    return acc.astype(jnp.float32) * step * w_step


def standardize_grad(x: jax.Array) -> jax.Array:
    """``jax.nn.standardize`` over rows (eps 1e-5 added to the variance) and its gradient."""
    def loss(z: jax.Array) -> jax.Array:
        return jnp.sum(jax.nn.standardize(z, axis=-1) * W[0])
    return jnp.concatenate([jax.nn.standardize(x, axis=-1).ravel(), jax.grad(loss)(x).ravel()])


def sliding_window_softmax(x: jax.Array) -> jax.Array:
    """Scores outside a causal window of 3 set to -inf (not a large negative), the softmax of
    each row, and its gradient."""
    i = jnp.arange(8)
    window = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < 3)

    def probabilities(z: jax.Array) -> jax.Array:
        return jax.nn.softmax(jnp.where(window, z.T @ z / 8.0, -jnp.inf), axis=-1)
    grad = jax.grad(lambda z: jnp.sum(probabilities(z) * W))(x)
    return jnp.concatenate([probabilities(x).ravel(), grad.ravel()])


def ignore_index_xent(x: jax.Array) -> jax.Array:
    """A cross-entropy whose ignored targets (-100) are masked out and whose mean is over the
    valid ones, and its gradient."""
    labels = jnp.array([3, -100, 5, -100])

    def loss(z: jax.Array) -> jax.Array:
        valid = labels >= 0
        picked = jnp.take_along_axis(jax.nn.log_softmax(z, -1),
                                     jnp.where(valid, labels, 0)[:, None], -1)[:, 0]
        return -jnp.sum(jnp.where(valid, picked, 0.0)) / jnp.maximum(valid.sum(), 1)
    return jnp.concatenate([loss(x)[None], jax.grad(loss)(x).ravel()])


def vae_elbo_grad(x: jax.Array) -> jax.Array:
    """A VAE's negative ELBO: a reparametrized sample with a softplus standard deviation, a
    reconstruction error and the KL to N(0, 1) (its ``log(sigma)``), and the gradient."""
    def loss(z: jax.Array) -> jax.Array:
        mu, sigma = z[:, :4], jax.nn.softplus(z[:, 4:]) + 1e-6
        sample = mu + sigma * NOISE[:, :4]
        kl = 0.5 * jnp.sum(sigma ** 2 + mu ** 2 - 1.0 - 2.0 * jnp.log(sigma))
        return jnp.sum((sample @ DECODER - NOISE) ** 2) + kl
    return jnp.concatenate([loss(x)[None], jax.grad(loss)(x).ravel()])


def maxabs_normalize_grad(x: jax.Array) -> jax.Array:
    """``x / (max|x| + 1e-12)``, the normalization FP8 recipes apply, and its gradient."""
    def normalized(z: jax.Array) -> jax.Array:
        return z / (jnp.max(jnp.abs(z)) + 1e-12)
    grad = jax.grad(lambda z: jnp.sum(normalized(z) * W[:4]))(x)
    return jnp.concatenate([normalized(x).ravel(), grad.ravel()])


def huber_small_delta(x: jax.Array) -> jax.Array:
    """A Huber loss with delta 1e-3 (quadratic only in a narrow band), and its gradient."""
    def loss(z: jax.Array) -> jax.Array:
        error = z - 0.5 * NOISE
        size = jnp.abs(error)
        return jnp.sum(jnp.where(size <= 1e-3, 0.5 * error * error, 1e-3 * (size - 0.5e-3)))
    return jnp.concatenate([loss(x)[None], jax.grad(loss)(x).ravel()])


def learned_temperature(x: jax.Array) -> jax.Array:
    """Logits times ``exp(log_t)`` with the log-temperature read from the input (a learned
    parameter), a log-softmax, and the gradient through both."""
    def loss(z: jax.Array) -> jax.Array:
        return jnp.sum(jax.nn.log_softmax(z[1:] * jnp.exp(z[0, 0] * 0.1), -1) * NOISE[1:])
    return jnp.concatenate([loss(x)[None], jax.grad(loss)(x).ravel()])


def lookahead_scan(x: jax.Array) -> jax.Array:
    """Lookahead: fast weights take 12 steps toward the input under ``lax.scan``, the slow
    weights move halfway to them every fourth step (``t % 4``), and the fast ones restart
    there."""
    def body(carry: tuple[jax.Array, jax.Array], t: jax.Array
             ) -> tuple[tuple[jax.Array, jax.Array], None]:
        fast, slow = carry
        fast = fast - 0.1 * (fast - x)
        sync = (t % 4) == 3
        slow = jnp.where(sync, slow + 0.5 * (fast - slow), slow)
        return (jnp.where(sync, slow, fast), slow), None
    (fast, slow), _ = jax.lax.scan(body, (jnp.zeros_like(x), jnp.zeros_like(x)), jnp.arange(12))
    return jnp.concatenate([fast.ravel(), slow.ravel()])

PATTERNS: dict[str, Callable[[jax.Array], jax.Array]] = {
    f.__name__: f for f in (
        moe_top2, online_softmax_scan, adafactor, lion, grad_accumulation_scan,
        cumulative_ssm, linear_recurrence, depthwise_conv_grad, label_smoothing,
        top_k_and_sort, masked_logsumexp, causal_attention_grad, exact_gelu_grad,
        rmsnorm_grad, kv_cache_loop, segment_sum, layer_scale, cosine_similarity_grad,
        global_norm_clip, powers, clip_values, sample_variances, warmup_step,
        logaddexp_softplus, elu_mish_grad, polyak_average, one_hot_embedding, large_mean,
        rank_weights, lamb_update, adam_scan, fake_quant_ste, contrastive_loss_grad,
        spectral_norm, newton_sqrt_while, skip_nonfinite_cond, per_example_clip,
        sharpness_aware_grad, entropy_grad, swiglu_grad, cumulative_logsumexp, weight_norm_grad,
        gumbel_softmax, safe_distance_grad, fused_attention_grad, diffusion_noising,
        scaled_square_moment, z_loss_grad, inner_steps_momentum, incomplete_gamma,
        pseudo_inverse, conjugate_gradient, schedule_in_step, scan_unrolled_ema,
        int8_matmul, standardize_grad, sliding_window_softmax, ignore_index_xent, vae_elbo_grad,
        maxabs_normalize_grad, huber_small_delta, learned_temperature, lookahead_scan)}
