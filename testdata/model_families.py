"""Training steps of the common model families, small, written the way Flax users write them.

Pure JAX + Flax linen + optax, no project imports: tests import it as
``from testdata import model_families`` (pytest puts the repository root on the path) and
benchmarks load it by path. Each factory returns a
``Family(step, state, batches)``:

* ``step(state, *batch) -> (state, loss)``: one training step; ``state`` is a Flax
  ``TrainState`` (with BatchNorm statistics and a PRNG key where the family has them);
* ``state``: the initial state, deterministic in ``seed``;
* ``batches()``: a fresh iterator over the same batches (numpy arrays) on every call, so that
  every mode of a benchmark trains on the same data.

``TrainState.create`` sets ``step=0``, a Python int; ``ScaledStep.scale_args`` rejects Python
scalar leaves today, so the states here hold it as an int32 array (``_state``).

Optimizers are those the families usually train with: SGD with momentum for the CNN and the
ResNet, Adam/AdamW with warmup + cosine schedules and global-norm clipping for the others.
Data: MNIST images from ``../shared/data/mnist`` where the repository sits beside ``shared``
(random images otherwise), and token sequences from a seeded random Markov chain.
"""

from __future__ import annotations

import functools
import gzip
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state

PyTree = Any
Batch = tuple[np.ndarray, ...]
StepFn = Callable[..., tuple[Any, jax.Array]]
LossFn = Callable[..., tuple[jax.Array, dict[str, Any]]]

MNIST_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mnist"
SCHEDULE_STEPS = 100  # the length of the benchmark's runs: warmup + cosine over it
PAD = 0  # the padding token of the sequence families


class Family(NamedTuple):
    """What each factory returns (a tuple: ``step, state, batches = family``)."""

    step: StepFn
    state: PyTree
    batches: Callable[[], Iterator[Batch]]


class State(train_state.TrainState):
    """``TrainState`` with BatchNorm running statistics and a PRNG key (None where unused)."""

    batch_stats: Any = None
    key: Any = None


def _state(model: nn.Module, params: PyTree, tx: optax.GradientTransformation,
           **extra: Any) -> State:
    """``State.create`` with the step counter as an int32 array, not the Python 0 it sets
    (``scale_args`` takes arrays only)."""
    state = State.create(apply_fn=model.apply, params=params, tx=tx, **extra)
    return state.replace(step=jnp.zeros((), jnp.int32))


def _train_step(loss_fn: LossFn) -> StepFn:
    """The step every family shares: ``value_and_grad`` of ``loss_fn(params, state, key,
    *batch) -> (loss, new state fields)``, the optax update through ``apply_gradients``, and a
    fresh key for the next step where the state has one."""

    def step(state: State, *batch: jax.Array) -> tuple[State, jax.Array]:
        key = step_key = state.key
        if key is not None:
            key, step_key = jax.random.split(key)
        (loss, fields), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state.params, state, step_key, *batch)
        state = state.apply_gradients(grads=grads, **fields)
        return (state if key is None else state.replace(key=key)), loss

    return step


# ----- optimizers ---------------------------------------------------------------------------
def _sgd_momentum(lr: float, weight_decay: float = 0.0) -> optax.GradientTransformation:
    sgd = optax.sgd(lr, momentum=0.9)
    return optax.chain(optax.add_decayed_weights(weight_decay), sgd) if weight_decay else sgd


def _schedule(peak: float) -> optax.Schedule:
    """Linear warmup from 0 over a tenth of the run, cosine decay to a tenth of the peak."""
    warmup = SCHEDULE_STEPS // 10
    return optax.warmup_cosine_decay_schedule(0.0, peak, warmup, SCHEDULE_STEPS, peak / 10)


def _decay_mask(params: PyTree) -> PyTree:
    """AdamW decays kernels and embeddings only, not biases and norm scales."""
    return jax.tree_util.tree_map_with_path(
        lambda path, _: getattr(path[-1], "key", None) in ("kernel", "embedding"), params)


def _adamw(peak: float, weight_decay: float = 0.01) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(1.0),
                       optax.adamw(_schedule(peak), weight_decay=weight_decay,
                                   mask=_decay_mask))


def _adam(peak: float) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(1.0), optax.adam(_schedule(peak)))


# ----- data ---------------------------------------------------------------------------------
def _read_idx(path: Path, offset: int) -> np.ndarray:
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


@functools.cache
def mnist(count: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """The first ``count`` MNIST test images (N, 28, 28, 1) in [0, 1] and their labels; random
    images and labels where ``../shared`` is not there."""
    images_path = MNIST_DIR / "t10k-images-idx3-ubyte.gz"
    if images_path.exists():
        images = _read_idx(images_path, 16).reshape(-1, 28, 28, 1)[:count]
        labels = _read_idx(MNIST_DIR / "t10k-labels-idx1-ubyte.gz", 8)[:count]
        return images.astype(np.float32) / 255.0, labels.astype(np.int32)
    rng = np.random.default_rng(0)
    images = (rng.random((count, 28, 28, 1)) < 0.2).astype(np.float32)
    return images, rng.integers(0, 10, count).astype(np.int32)


def _image_batches(images: np.ndarray, labels: np.ndarray, batch: int,
                   seed: int) -> Callable[[], Iterator[Batch]]:
    def batches() -> Iterator[Batch]:
        rng = np.random.default_rng(seed)
        while True:
            index = rng.integers(0, len(images), batch)
            yield images[index], labels[index]

    return batches


def _markov_chain(vocab: int, seed: int) -> np.ndarray:
    """Transition probabilities of a random chain over tokens 1..vocab-1 where each token has
    three likely successors: text-like structure a model can learn in a few hundred steps."""
    rng = np.random.default_rng(seed)
    table = np.full((vocab, vocab), 0.02)
    table[:, PAD] = 0.0
    for token in range(vocab):
        table[token, rng.choice(np.arange(1, vocab), 3, replace=False)] += [3.0, 2.0, 1.0]
    return table / table.sum(axis=1, keepdims=True)


def _markov_tokens(rng: np.random.Generator, chain: np.ndarray, batch: int,
                   length: int) -> np.ndarray:
    """``batch`` sequences of ``length`` tokens (never PAD) sampled from ``chain``."""
    vocab = chain.shape[0]
    tokens = np.empty((batch, length), np.int32)
    tokens[:, 0] = rng.integers(1, vocab, batch)
    cumulative = np.cumsum(chain, axis=1)
    for t in range(1, length):
        draws = rng.random((batch, 1))
        tokens[:, t] = (draws > cumulative[tokens[:, t - 1]]).sum(axis=1)
    return np.minimum(tokens, vocab - 1)


def _lengths(rng: np.random.Generator, batch: int, length: int) -> np.ndarray:
    """Sequence lengths between half and all of ``length`` (the rest is padding)."""
    return rng.integers(length // 2, length + 1, batch).astype(np.int32)


def _pad(tokens: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    return np.where(np.arange(tokens.shape[1]) < lengths[:, None], tokens, PAD).astype(np.int32)


# ----- losses -------------------------------------------------------------------------------
def _xent(logits: jax.Array, labels: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """Mean softmax cross-entropy over the (unmasked) labels."""
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    if mask is None:
        return losses.mean()
    mask = mask.astype(losses.dtype)
    return (losses * mask).sum() / jnp.maximum(mask.sum(), 1.0)


# ----- CNN with BatchNorm and dropout -------------------------------------------------------
class CNN(nn.Module):
    """Two conv + BatchNorm + ReLU + max-pool stages, a dense layer with dropout."""

    width: int = 8
    classes: int = 10
    dropout: float = 0.25

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        for features in (self.width, 2 * self.width):
            x = nn.Conv(features, (3, 3))(x)
            x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
            x = nn.max_pool(nn.relu(x), (2, 2), (2, 2))
        x = nn.relu(nn.Dense(4 * self.width)(x.reshape(x.shape[0], -1)))
        x = nn.Dropout(self.dropout, deterministic=not train)(x)
        return nn.Dense(self.classes)(x)


def _batchnorm_loss(train_kwargs: Callable[[jax.Array | None], dict[str, Any]]) -> LossFn:
    """Cross-entropy of a classifier with BatchNorm: the running statistics come back as the
    new ``batch_stats``."""

    def loss_fn(params: PyTree, state: State, key: jax.Array | None, images: jax.Array,
                labels: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
        logits, updates = state.apply_fn(
            {"params": params, "batch_stats": state.batch_stats}, images, train=True,
            mutable=["batch_stats"], **train_kwargs(key))
        return _xent(logits, labels), {"batch_stats": updates["batch_stats"]}

    return loss_fn


def cnn(seed: int = 0, batch: int = 32) -> Family:
    """MNIST CNN with BatchNorm and dropout, SGD with momentum 0.9 at a learning rate of 0.01.
    At 0.05 the run was chaotic: jax.jit's own mean loss over steps 91-100 moved by up to 7.8%
    when its initial parameters moved by 1e-6 (by 0.08% at 0.01, 8 seeds), so no mode could be
    judged on it, and it trained worse (that mean loss 1.15 against 0.60)."""
    model = CNN()
    images, labels = mnist()
    k_init, k_dropout, k_state = jax.random.split(jax.random.key(seed), 3)
    variables = model.init({"params": k_init, "dropout": k_dropout}, images[:1], train=False)
    state = _state(model, variables["params"], _sgd_momentum(0.01),
                   batch_stats=variables["batch_stats"], key=k_state)
    step = _train_step(_batchnorm_loss(lambda key: {"rngs": {"dropout": key}}))
    return Family(step, state, _image_batches(images, labels, batch, seed))


# ----- ResNet -------------------------------------------------------------------------------
class BasicBlock(nn.Module):
    """Two 3x3 convs with BatchNorm, the last BatchNorm's scale starting at zero (as in Flax's
    ImageNet example), a 1x1 projection where the shape changes."""

    features: int
    strides: int = 1

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        norm = functools.partial(nn.BatchNorm, use_running_average=not train, momentum=0.9)
        y = nn.Conv(self.features, (3, 3), self.strides, use_bias=False)(x)
        y = nn.relu(norm()(y))
        y = nn.Conv(self.features, (3, 3), use_bias=False)(y)
        y = norm(scale_init=nn.initializers.zeros_init())(y)
        if x.shape != y.shape:
            x = nn.Conv(self.features, (1, 1), self.strides, use_bias=False)(x)
            x = norm()(x)
        return nn.relu(x + y)


class ResNet(nn.Module):
    """CIFAR-style ResNet: a 3x3 stem, BasicBlock stages that halve the resolution and double
    the width, global average pooling."""

    stages: tuple[int, ...] = (1, 1, 1)
    width: int = 8
    classes: int = 10

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        x = nn.Conv(self.width, (3, 3), use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9)(x))
        for stage, blocks in enumerate(self.stages):
            for block in range(blocks):
                strides = 2 if stage > 0 and block == 0 else 1
                x = BasicBlock(self.width * 2 ** stage, strides)(x, train)
        return nn.Dense(self.classes)(x.mean(axis=(1, 2)))


def resnet(seed: int = 0, batch: int = 16, stages: tuple[int, ...] = (1, 1, 1)) -> Family:
    """ResNet on MNIST padded to 32x32 and normalized, SGD with momentum and weight decay."""
    model = ResNet(stages)
    images, labels = mnist()
    images = (np.pad(images, ((0, 0), (2, 2), (2, 2), (0, 0))) - 0.1307) / 0.3081
    variables = model.init(jax.random.key(seed), images[:1], train=False)
    state = _state(model, variables["params"], _sgd_momentum(0.05, weight_decay=5e-4),
                   batch_stats=variables["batch_stats"])
    step = _train_step(_batchnorm_loss(lambda key: {}))
    return Family(step, state, _image_batches(images.astype(np.float32), labels, batch, seed))


# ----- VAE ----------------------------------------------------------------------------------
class VAE(nn.Module):
    """MLP encoder to a Gaussian latent, reparameterized sample (``jax.random.normal`` in the
    step), MLP decoder to Bernoulli logits."""

    features: int
    hidden: int = 64
    latent: int = 8

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        h = nn.relu(nn.Dense(self.hidden)(x))
        mean, logvar = nn.Dense(self.latent)(h), nn.Dense(self.latent)(h)
        z = mean + jnp.exp(0.5 * logvar) * jax.random.normal(self.make_rng("noise"), mean.shape)
        logits = nn.Dense(self.features)(nn.relu(nn.Dense(self.hidden)(z)))
        return logits, mean, logvar


def _vae_loss(params: PyTree, state: State, key: jax.Array,
              images: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
    """Negative ELBO per example: Bernoulli reconstruction + KL to the standard normal."""
    logits, mean, logvar = state.apply_fn({"params": params}, images, rngs={"noise": key})
    reconstruction = optax.sigmoid_binary_cross_entropy(logits, images).sum(axis=-1)
    kl = -0.5 * jnp.sum(1 + logvar - jnp.square(mean) - jnp.exp(logvar), axis=-1)
    return jnp.mean(reconstruction + kl), {}


def vae(seed: int = 0, batch: int = 32) -> Family:
    """VAE on flattened MNIST, Adam with warmup + cosine and clipping."""
    images, _ = mnist()
    flat = images.reshape(len(images), -1)
    model = VAE(flat.shape[1])
    k_init, k_noise, k_state = jax.random.split(jax.random.key(seed), 3)
    params = model.init({"params": k_init, "noise": k_noise}, flat[:1])["params"]
    state = _state(model, params, _adam(3e-3), key=k_state)
    images_batches = _image_batches(flat, np.zeros(len(flat), np.int32), batch, seed)

    def batches() -> Iterator[Batch]:
        return ((x,) for x, _ in images_batches())

    return Family(_train_step(_vae_loss), state, batches)


# ----- LSTM classifier ----------------------------------------------------------------------
class LSTMClassifier(nn.Module):
    """Embedding, bidirectional LSTM over the unpadded part, masked mean pooling, dense."""

    vocab: int
    embed: int = 16
    hidden: int = 16
    classes: int = 4

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array) -> jax.Array:
        x = nn.Embed(self.vocab, self.embed)(tokens)
        x = nn.Bidirectional(nn.RNN(nn.OptimizedLSTMCell(self.hidden)),
                             nn.RNN(nn.OptimizedLSTMCell(self.hidden)))(x, seq_lengths=lengths)
        mask = (jnp.arange(tokens.shape[1]) < lengths[:, None])[..., None]
        pooled = jnp.sum(x * mask, axis=1) / jnp.maximum(lengths[:, None], 1)
        return nn.Dense(self.classes)(pooled)


def _classifier_loss(params: PyTree, state: State, key: None, tokens: jax.Array,
                     lengths: jax.Array, labels: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
    return _xent(state.apply_fn({"params": params}, tokens, lengths), labels), {}


def lstm_classifier(seed: int = 0, batch: int = 16, length: int = 12, vocab: int = 24,
                    classes: int = 4) -> Family:
    """Sequences labelled by the most frequent token class (token mod ``classes``) in their
    unpadded part; Adam with warmup + cosine and clipping."""
    model = LSTMClassifier(vocab, classes=classes)
    tokens = np.ones((1, length), np.int32)
    params = model.init(jax.random.key(seed), tokens, np.array([length], np.int32))["params"]
    state = _state(model, params, _adam(1e-2))

    def batches() -> Iterator[Batch]:
        rng = np.random.default_rng(seed)
        while True:
            lengths = _lengths(rng, batch, length)
            tokens = _pad(rng.integers(1, vocab, (batch, length)), lengths)
            classes_of = np.where(tokens == PAD, -1, tokens % classes)
            counts = (classes_of[..., None] == np.arange(classes)).sum(axis=1)
            yield tokens, lengths, counts.argmax(axis=1).astype(np.int32)

    return Family(_train_step(_classifier_loss), state, batches)


# ----- LSTM sequence to sequence ------------------------------------------------------------
class Seq2Seq(nn.Module):
    """LSTM encoder whose final carry starts an LSTM decoder fed the shifted target (teacher
    forcing)."""

    vocab: int
    embed: int = 16
    hidden: int = 32

    @nn.compact
    def __call__(self, source: jax.Array, decoder_input: jax.Array) -> jax.Array:
        carry, _ = nn.RNN(nn.OptimizedLSTMCell(self.hidden), return_carry=True)(
            nn.Embed(self.vocab, self.embed)(source))
        out = nn.RNN(nn.OptimizedLSTMCell(self.hidden))(
            nn.Embed(self.vocab, self.embed)(decoder_input), initial_carry=carry)
        return nn.Dense(self.vocab)(out)


def _shift_right(target: jax.Array, bos: int) -> jax.Array:
    """The decoder's input: ``bos`` then the target without its last token."""
    return jnp.concatenate([jnp.full_like(target[:, :1], bos), target[:, :-1]], axis=1)


def _seq2seq_loss(params: PyTree, state: State, key: None, source: jax.Array,
                  target: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
    logits = state.apply_fn({"params": params}, source, _shift_right(target, PAD))
    return _xent(logits, target), {}


def lstm_seq2seq(seed: int = 0, batch: int = 16, length: int = 8, vocab: int = 16) -> Family:
    """Reverse the source sequence; Adam with warmup + cosine and clipping."""
    model = Seq2Seq(vocab)
    example = np.ones((1, length), np.int32)
    params = model.init(jax.random.key(seed), example, example)["params"]
    state = _state(model, params, _adam(1e-2))

    def batches() -> Iterator[Batch]:
        rng = np.random.default_rng(seed)
        while True:
            source = rng.integers(1, vocab, (batch, length)).astype(np.int32)
            yield source, source[:, ::-1].copy()

    return Family(_train_step(_seq2seq_loss), state, batches)


# ----- transformers -------------------------------------------------------------------------
class MLPBlock(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        width = x.shape[-1]
        return nn.Dense(width)(nn.gelu(nn.Dense(4 * width)(x)))


class DecoderBlock(nn.Module):
    """Pre-LN block: causal self-attention, cross-attention to ``memory`` when given, MLP."""

    heads: int

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, memory: jax.Array | None = None,
                 memory_mask: jax.Array | None = None) -> jax.Array:
        x = x + nn.MultiHeadDotProductAttention(self.heads)(nn.LayerNorm()(x), mask=mask)
        if memory is not None:
            x = x + nn.MultiHeadDotProductAttention(self.heads)(nn.LayerNorm()(x), memory,
                                                                 mask=memory_mask)
        return x + MLPBlock()(nn.LayerNorm()(x))


class Embedding(nn.Module):
    """Token embedding plus a learned position embedding."""

    vocab: int
    width: int
    context: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        position = self.param("position", nn.initializers.normal(0.02),
                              (self.context, self.width))
        return nn.Embed(self.vocab, self.width)(tokens) + position[: tokens.shape[1]]


class TransformerLM(nn.Module):
    """Decoder-only causal language model (GPT-style)."""

    vocab: int
    width: int = 32
    heads: int = 2
    layers: int = 2
    context: int = 16

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = Embedding(self.vocab, self.width, self.context)(tokens)
        mask = nn.make_causal_mask(tokens)
        for _ in range(self.layers):
            x = DecoderBlock(self.heads)(x, mask)
        return nn.Dense(self.vocab)(nn.LayerNorm()(x))


def _lm_loss(params: PyTree, state: State, key: None, tokens: jax.Array,
             targets: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
    return _xent(state.apply_fn({"params": params}, tokens), targets), {}


def _lm_batches(seed: int, vocab: int, batch: int,
                context: int) -> Callable[[], Iterator[Batch]]:
    """Next-token windows of the Markov chain: (tokens, the same shifted by one)."""
    chain = _markov_chain(vocab, seed)

    def batches() -> Iterator[Batch]:
        rng = np.random.default_rng(seed)
        while True:
            sequence = _markov_tokens(rng, chain, batch, context + 1)
            yield sequence[:, :-1], sequence[:, 1:]

    return batches


def transformer_lm(seed: int = 0, batch: int = 8, context: int = 16, vocab: int = 32,
                   layers: int = 2) -> Family:
    """Causal transformer LM on Markov-chain text; AdamW with warmup + cosine and clipping."""
    model = TransformerLM(vocab, layers=layers, context=context)
    params = model.init(jax.random.key(seed), np.ones((1, context), np.int32))["params"]
    state = _state(model, params, _adamw(3e-3))
    return Family(_train_step(_lm_loss), state, _lm_batches(seed, vocab, batch, context))


class EncoderBlock(nn.Module):
    """Pre-LN block: bidirectional self-attention under a padding mask, MLP."""

    heads: int

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        x = x + nn.MultiHeadDotProductAttention(self.heads)(nn.LayerNorm()(x), mask=mask)
        return x + MLPBlock()(nn.LayerNorm()(x))


class Encoder(nn.Module):
    vocab: int
    width: int
    heads: int
    layers: int
    context: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = Embedding(self.vocab, self.width, self.context)(tokens)
        mask = nn.make_attention_mask(tokens != PAD, tokens != PAD)
        for _ in range(self.layers):
            x = EncoderBlock(self.heads)(x, mask)
        return nn.LayerNorm()(x)


class EncoderDecoder(nn.Module):
    """Encoder-decoder transformer: padded source, causal decoder with cross-attention."""

    vocab: int
    width: int = 32
    heads: int = 2
    layers: int = 1
    context: int = 12

    @nn.compact
    def __call__(self, source: jax.Array, decoder_input: jax.Array) -> jax.Array:
        memory = Encoder(self.vocab, self.width, self.heads, self.layers, self.context)(source)
        x = Embedding(self.vocab, self.width, self.context)(decoder_input)
        mask = nn.make_causal_mask(decoder_input)
        memory_mask = nn.make_attention_mask(jnp.ones_like(decoder_input, bool),
                                             source != PAD)
        for _ in range(self.layers):
            x = DecoderBlock(self.heads)(x, mask, memory, memory_mask)
        return nn.Dense(self.vocab)(nn.LayerNorm()(x))


def _translation_loss(params: PyTree, state: State, key: None, source: jax.Array,
                      target: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
    """Label-smoothed cross-entropy over the unpadded target tokens."""
    logits = state.apply_fn({"params": params}, source, _shift_right(target, PAD))
    labels = optax.smooth_labels(jax.nn.one_hot(target, logits.shape[-1]), 0.1)
    mask = (target != PAD).astype(jnp.float32)
    losses = optax.softmax_cross_entropy(logits, labels)
    return (losses * mask).sum() / jnp.maximum(mask.sum(), 1.0), {}


def encoder_decoder(seed: int = 0, batch: int = 8, length: int = 12, vocab: int = 16) -> Family:
    """Translate a padded source to its reverse with every token shifted by one (padding kept
    at the end); AdamW with warmup + cosine and clipping."""
    model = EncoderDecoder(vocab, context=length)
    example = np.ones((1, length), np.int32)
    params = model.init(jax.random.key(seed), example, example)["params"]
    state = _state(model, params, _adamw(3e-3))

    def batches() -> Iterator[Batch]:
        rng = np.random.default_rng(seed)
        while True:
            lengths = _lengths(rng, batch, length)
            source = _pad(rng.integers(1, vocab, (batch, length)), lengths)
            shifted = np.where(source == PAD, PAD, source % (vocab - 1) + 1)
            target = np.stack([np.concatenate([row[:n][::-1], row[n:]])
                               for row, n in zip(shifted, lengths, strict=True)])
            yield source, target.astype(np.int32)

    return Family(_train_step(_translation_loss), state, batches)


# ----- sequence tagger ----------------------------------------------------------------------
class Tagger(nn.Module):
    """Transformer encoder with a per-token classification head."""

    vocab: int
    tags: int
    width: int = 32
    heads: int = 2
    layers: int = 2
    context: int = 16

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = Encoder(self.vocab, self.width, self.heads, self.layers, self.context)(tokens)
        return nn.Dense(self.tags)(x)


def _tagger_loss(params: PyTree, state: State, key: None, tokens: jax.Array,
                 tags: jax.Array) -> tuple[jax.Array, dict[str, Any]]:
    return _xent(state.apply_fn({"params": params}, tokens), tags, tokens != PAD), {}


def sequence_tagger(seed: int = 0, batch: int = 8, length: int = 16, vocab: int = 24,
                    tags: int = 5, layers: int = 2) -> Family:
    """Padded sequences tagged ``(token + previous token) mod tags``: per-token labels that
    need context; the loss is masked to the unpadded tokens. AdamW, warmup + cosine,
    clipping."""
    model = Tagger(vocab, tags, layers=layers, context=length)
    params = model.init(jax.random.key(seed), np.ones((1, length), np.int32))["params"]
    state = _state(model, params, _adamw(3e-3))

    def batches() -> Iterator[Batch]:
        rng = np.random.default_rng(seed)
        while True:
            lengths = _lengths(rng, batch, length)
            tokens = _pad(rng.integers(1, vocab, (batch, length)), lengths)
            previous = np.pad(tokens[:, :-1], ((0, 0), (1, 0)))
            yield tokens, ((tokens + previous) % tags).astype(np.int32)

    return Family(_train_step(_tagger_loss), state, batches)


# ----- GPT with its layers under nn.scan ----------------------------------------------------
class ScannedBlock(nn.Module):
    """A decoder block in ``nn.scan``'s carry form: ``(x, _) -> (x, None)``."""

    heads: int

    @nn.compact
    def __call__(self, x: jax.Array, _: None) -> tuple[jax.Array, None]:
        return DecoderBlock(self.heads)(x, nn.make_causal_mask(x[..., 0])), None


class ScanGPT(nn.Module):
    """GPT whose blocks are one set of parameters stacked on a leading axis, run by
    ``nn.scan`` (a ``stablehlo.while`` over the layers)."""

    vocab: int
    width: int = 32
    heads: int = 2
    layers: int = 3
    context: int = 16

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = Embedding(self.vocab, self.width, self.context)(tokens)
        blocks = nn.scan(ScannedBlock, variable_axes={"params": 0},
                         split_rngs={"params": True}, length=self.layers)
        x, _ = blocks(self.heads)(x, None)
        return nn.Dense(self.vocab)(nn.LayerNorm()(x))


def scan_gpt(seed: int = 0, batch: int = 8, context: int = 16, vocab: int = 32,
             layers: int = 3) -> Family:
    """Scan-over-layers GPT on Markov-chain text; AdamW with warmup + cosine and clipping."""
    model = ScanGPT(vocab, layers=layers, context=context)
    params = model.init(jax.random.key(seed), np.ones((1, context), np.int32))["params"]
    state = _state(model, params, _adamw(3e-3))
    return Family(_train_step(_lm_loss), state, _lm_batches(seed, vocab, batch, context))


FAMILIES: dict[str, Callable[..., Family]] = {
    "cnn": cnn,
    "resnet": resnet,
    "vae": vae,
    "lstm_classifier": lstm_classifier,
    "lstm_seq2seq": lstm_seq2seq,
    "transformer_lm": transformer_lm,
    "encoder_decoder": encoder_decoder,
    "sequence_tagger": sequence_tagger,
    "scan_gpt": scan_gpt,
}


# ----- comparing a run with jax.jit's ------------------------------------------------------
# Pure JAX/numpy on trees of arrays, shared by tests/test_model_families.py and
# benchmarks/models.py. A scaled run is compared through its unscaled values (``unscale_tree``)
# or its data halves.

NOISE = 1e-6  # a first moment this far below the tree's largest is rounding noise


def _first_moments(opt_state: PyTree) -> PyTree | None:
    """The gradient-shaped first moment of the optimizer state: SGD's momentum trace or Adam's
    ``mu`` (the first one found), None if there is neither."""
    kinds = (optax.TraceState, optax.ScaleByAdamState)
    for node in jax.tree.leaves(opt_state, is_leaf=lambda x: isinstance(x, kinds)):
        if isinstance(node, optax.TraceState):
            return node.trace
        if isinstance(node, optax.ScaleByAdamState):
            return node.mu
    return None


def noise_mask(reference: State) -> PyTree:
    """Per parameter, whether the reference's gradient is rounding noise: its first moment at
    most ``NOISE`` times the largest. Such gradients are zero in exact arithmetic (a bias
    before BatchNorm, an attention key bias: softmax is shift-invariant), and Adam divides
    them by their own size, so any change of fusion moves the parameter by up to the learning
    rate: an f32 rewrite cannot match them, and need not."""
    moments = _first_moments(reference.opt_state)
    if moments is None:
        return jax.tree.map(lambda _: False, reference.params)
    peaks = jax.tree.map(lambda m: float(np.max(np.abs(np.asarray(m)), initial=0.0)), moments)
    largest = max(jax.tree.leaves(peaks), default=0.0)
    return jax.tree.map(lambda peak: peak <= NOISE * largest, peaks)


def without_noise(state: State, mask: PyTree) -> State:
    """``state`` with the parameters of ``mask`` and their optimizer moments zeroed."""

    def clear(tree: PyTree) -> PyTree:
        return jax.tree.map(lambda x, noisy: jnp.zeros_like(x) if noisy else x, tree, mask)

    def clear_moments(node: Any) -> Any:
        if isinstance(node, optax.TraceState):
            return node._replace(trace=clear(node.trace))
        if isinstance(node, optax.ScaleByAdamState):
            return node._replace(mu=clear(node.mu), nu=clear(node.nu))
        return node

    kinds = (optax.TraceState, optax.ScaleByAdamState)
    opt_state = jax.tree.map(clear_moments, state.opt_state,
                             is_leaf=lambda x: isinstance(x, kinds))
    return state.replace(params=clear(state.params), opt_state=opt_state)


def _floating(tree: PyTree) -> list[tuple[str, np.ndarray]]:
    """(path, array) of every floating leaf (PRNG keys and integers left out)."""
    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and jnp.issubdtype(dtype, jnp.floating):
            out.append((jax.tree_util.keystr(path), np.asarray(leaf, np.float64)))
    return out


def max_relative_diff(got: PyTree, want: PyTree) -> tuple[float, str]:
    """The largest ``max|got - want| / max|want|`` over the floating leaves, and its path
    (a leaf whose reference is all zero counts its absolute difference)."""
    worst, where = 0.0, ""
    for (path, a), (_, b) in zip(_floating(got), _floating(want), strict=True):
        peak = float(np.max(np.abs(b), initial=0.0))
        diff = float(np.max(np.abs(a - b), initial=0.0))
        value = diff / peak if peak > 0 else diff
        if not np.isfinite(value) or value > worst:
            worst, where = (np.inf if not np.isfinite(value) else value), path
            if not np.isfinite(value):
                break
    return worst, where


def nonfinite_leaves(tree: PyTree) -> list[str]:
    """Paths of the floating leaves with a NaN or an Inf."""
    return [path for path, a in _floating(tree) if not np.all(np.isfinite(a))]


def zeroed_leaves(data: PyTree, reference: PyTree) -> list[str]:
    """Paths of the leaves that are all zero in ``data`` but not in ``reference``."""
    return [path for (path, a), (_, b) in zip(_floating(data), _floating(reference), strict=True)
            if not np.any(a) and np.any(b)]
