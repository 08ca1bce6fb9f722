"""``ScaledStep.save`` / ``scalify_hlo.load_scaled``: a saved step is called like the original
(bit-identical outputs on the same inputs, the fed-back loop, inside ``jax.jit``) without
exporting or rewriting again, and every bad file is one ``ScalifyError`` line."""

from __future__ import annotations

import json
import zipfile
from collections import namedtuple
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import scalify_hlo
from scalify_hlo import Policy, ScaledArray, ScaledStep, compile_scaled, load_scaled, saved
from scalify_hlo import scaled_step as step_module
from scalify_hlo.errors import ScalifyError
from testdata import models

STEPS = 3


# The sample MLP step (SGD) of testdata/models.py, small: the saved file is what is tested.
train_step, _example = models.mlp_step(batch=8, sizes=(8, 16, 4))


@pytest.fixture(scope="module")
def problem() -> tuple[Any, jax.Array, jax.Array]:
    return _example


@pytest.fixture(scope="module")
def step(problem: tuple[Any, jax.Array, jax.Array]) -> ScaledStep:
    return compile_scaled(train_step, *problem)  # the default policy: f16 data, FP8 dots


@pytest.fixture(scope="module")
def saved_path(step: ScaledStep, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "step.scalify"
    step.save(path)
    return path


def assert_identical(a: Any, b: Any) -> None:
    a_leaves, a_tree = jax.tree.flatten(a)
    b_leaves, b_tree = jax.tree.flatten(b)
    assert a_tree == b_tree
    for x, y in zip(a_leaves, b_leaves, strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def no_rewrite(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make exporting or rewriting fail, for what must not do either."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("exported or rewrote again")

    monkeypatch.setattr(step_module, "rewrite_module_source", refuse)
    monkeypatch.setattr(step_module.jax_export, "export", refuse)
    monkeypatch.setattr(saved.jax_export, "export", refuse)


# ----- round trip -------------------------------------------------------------------------
def test_training_with_the_loaded_step_is_bit_identical(
        step: ScaledStep, saved_path: Path, problem: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Three steps fed back from ``scale_args``: every output, data and scale, bit for bit."""
    no_rewrite(monkeypatch)
    loaded = load_scaled(saved_path)
    params, x, y = problem
    state_a, state_b = step.scale_args(params, x, y)[0], loaded.scale_args(params, x, y)[0]
    assert_identical(state_a, state_b)
    for _ in range(STEPS):
        state_a, loss_a = step(state_a, x, y)
        state_b, loss_b = loaded(state_b, x, y)
        assert_identical((state_a, loss_a), (state_b, loss_b))
    assert float(loss_b.unscale()) < float(step(step.scale_args(params, x, y)[0], x, y)[1]
                                           .unscale())
    assert len(loaded._programs) == 1  # one program from the first call on, as the original


def test_a_step_with_delayed_statistics_round_trips(
        problem: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both programs are saved: the first call's (it measures) and the fed-back calls'
    (they apply the exponents the call before measured, carried in the bank)."""
    original = compile_scaled(train_step, *problem, policy=Policy(statistics="delayed"))
    assert original._delayed > 0
    path = tmp_path / "delayed.scalify"
    original.save(path)
    no_rewrite(monkeypatch)
    loaded = load_scaled(path)
    params, x, y = problem
    state_a, state_b = original.scale_args(params, x, y)[0], loaded.scale_args(params, x, y)[0]
    for _ in range(STEPS):
        state_a, loss_a = original(state_a, x, y)
        state_b, loss_b = loaded(state_b, x, y)
        assert_identical((state_a, loss_a), (state_b, loss_b))
    assert sorted(layout[-1] for layout in loaded._programs) == [-1, 0]  # both programs ran


def test_loaded_step_in_jit_with_plain_arguments(
        step: ScaledStep, saved_path: Path, problem: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    no_rewrite(monkeypatch)
    loaded = ScaledStep.load(saved_path)
    assert_identical(jax.jit(lambda *a: loaded(*a))(*problem),
                     jax.jit(lambda *a: step(*a))(*problem))


def test_loaded_step_keeps_report_stages_and_checks(step: ScaledStep, saved_path: Path,
                                                    problem: Any) -> None:
    loaded = load_scaled(saved_path)
    assert str(loaded.report()) == str(step.report())
    assert loaded.report().records == step.report().records
    assert loaded.report().table() == step.report().table()
    assert loaded.stages == step.stages and loaded.pipeline == step.pipeline
    assert loaded.stage("fp8-dots") == step.stage("fp8-dots")
    params, x, y = problem
    with pytest.raises(ScalifyError, match="shape"):
        loaded(params, x[:4], y)
    with pytest.raises(ScalifyError, match="structure"):
        loaded(params[:1], x, y)
    assert loaded.check_scales == step.check_scales and loaded.return_scaled


def test_a_loaded_step_checks_scales_as_the_saved_one(problem: Any, tmp_path: Path) -> None:
    params, x, y = problem
    step = compile_scaled(train_step, params, x, y, policy=Policy(data_dtype="float32",
                                                                  fp8_dots=False),
                          check_scales=True)
    step.save(tmp_path / "checked.scalify")
    loaded = load_scaled(tmp_path / "checked.scalify")
    assert loaded.check_scales
    bad = jax.tree.map(lambda v: ScaledArray(v, jnp.float32(-2.0)), params)
    with pytest.raises(ScalifyError, match="not a finite positive"):
        loaded(bad, x, y)


def test_keys_and_named_tuples_round_trip(tmp_path: Path) -> None:
    """A typed PRNG key and a registered named tuple in the trees; an unregistered one is a
    one-line error naming the way to register it."""
    State = namedtuple("State", "w count")

    def fn(state: Any, key: jax.Array) -> Any:
        key, sub = jax.random.split(key)
        noise = jax.random.normal(sub, state.w.shape)
        return State(state.w * 0.5 + noise, state.count + 1), key

    args = (State(jnp.ones(4), jnp.int32(0)), jax.random.key(1))
    step = compile_scaled(fn, *args, policy=scalify_hlo.Policy(data_dtype="float32",
                                                              fp8_dots=False))
    path = tmp_path / "keyed.scalify"
    with pytest.raises(ScalifyError, match="register_namedtuple_serialization"):
        step.save(path)
    assert not path.exists() and list(tmp_path.iterdir()) == []
    jax.export.register_namedtuple_serialization(State, serialized_name="test_saved.State")
    step.save(path)
    loaded = load_scaled(path)
    assert_identical(loaded(*args)[0], step(*args)[0])
    assert jax.random.key_data(loaded(*args)[1]).tolist() == \
        jax.random.key_data(step(*args)[1]).tolist()


# ----- writing ----------------------------------------------------------------------------
def test_failed_save_leaves_the_old_file(step: ScaledStep, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "step.scalify"
    path.write_bytes(b"previous")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(saved.zipfile.ZipFile, "writestr", broken)
    with pytest.raises(ScalifyError, match="No space left"):
        step.save(path)
    assert path.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["step.scalify"]  # no temporary file


def test_save_into_a_missing_folder_is_one_line(step: ScaledStep, tmp_path: Path) -> None:
    with pytest.raises(ScalifyError, match="cannot write"):
        step.save(tmp_path / "no" / "such" / "step.scalify")


# ----- bad files: one line ----------------------------------------------------------------
def rewritten(source: Path, target: Path, change: Any) -> Path:
    """``source`` with each member passed through ``change(name, data)``."""
    with zipfile.ZipFile(source) as inp, zipfile.ZipFile(target, "w") as out:
        for name in inp.namelist():
            data = change(name, inp.read(name))
            if data is not None:
                out.writestr(name, data)
    return target


def other_version(name: str, data: bytes) -> bytes:
    if name != "meta.json":
        return data
    meta = json.loads(data)
    meta["format_version"], meta["scalify_hlo_version"] = 99, "9.9.9"
    return json.dumps(meta).encode()


BAD_FILES = {
    "missing": (lambda src, dst: dst, "cannot read"),
    "directory": (lambda src, dst: dst.parent, "cannot read"),
    "not-a-zip": (lambda src, dst: dst.write_bytes(b"hello") and dst, "not a saved"),
    "truncated": (lambda src, dst: dst.write_bytes(src.read_bytes()[:200]) and dst,
                  "not a saved"),
    "flipped-byte": (lambda src, dst: dst.write_bytes(
        src.read_bytes()[:300] + bytes([src.read_bytes()[300] ^ 0xFF])
        + src.read_bytes()[301:]) and dst, "saved"),
    "no-program": (lambda src, dst: rewritten(
        src, dst, lambda n, d: None if n == "exported.bin" else d), "no exported.bin"),
    "junk-program": (lambda src, dst: rewritten(
        src, dst, lambda n, d: b"junk" * 10 if n == "exported.bin" else d), "cannot load"),
    "bad-meta": (lambda src, dst: rewritten(
        src, dst, lambda n, d: b"{}" if n == "meta.json" else d), "not a saved"),
    "other-version": (lambda src, dst: rewritten(src, dst, other_version),
                      "saved by scalify-hlo 9.9.9 in saved-step format 99"),
    "specs-disagree": (lambda src, dst: rewritten(src, dst, lambda n, d: json.dumps(
        {**json.loads(d), "in_specs": json.loads(d)["in_specs"][:-1]}).encode()
        if n == "meta.json" else d), "not a valid saved step"),
}


@pytest.mark.parametrize("case", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_bad_files_are_one_line_errors(saved_path: Path, tmp_path: Path, case: Any) -> None:
    make, needle = case
    path = make(saved_path, tmp_path / "bad.scalify")
    with pytest.raises(ScalifyError) as error:
        load_scaled(path)
    message = str(error.value)
    assert needle in message and "\n" not in message, message
