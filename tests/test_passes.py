"""Passes as typed objects: each pass a frozen dataclass whose fields are its options, read from
the textual pipeline syntax by one parser and validated when it is constructed, so a bad
pipeline fails before any IR is touched."""

from __future__ import annotations

import dataclasses
import re

import pytest

from scalify_hlo.errors import PipelineError
from scalify_hlo.policy import Policy
from scalify_hlo.rewrites import PASSES, ModulePass, parse_pipeline, print_pipeline
from scalify_hlo.rewrites.fp8_dots import Fp8Dots
from scalify_hlo.rewrites.rescale import Rescale
from scalify_hlo.rewrites.scalify import Scalify


@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_pass_is_a_frozen_dataclass_that_prints_and_parses_back(name: str) -> None:
    cls = PASSES[name]
    assert issubclass(cls, ModulePass) and dataclasses.is_dataclass(cls)
    default = cls()
    assert str(default) == name and parse_pipeline(name) == [default]
    with pytest.raises(dataclasses.FrozenInstanceError):
        default.name = "other"  # type: ignore[misc]
    for option in cls.options():
        assert option.name == option.field.replace("_", "-") and option.help
        assert getattr(default, option.field) == option.default


@pytest.mark.parametrize("text, expected", [
    ("rescale{at=gradients,outputs method=rms}",
     Rescale(at=("gradients", "outputs"), method="rms")),
    ("scalify{data-dtype=bfloat16 strict}", Scalify(data_dtype="bfloat16", strict=True)),
    ("fp8-dots{min-size=4096 exclude='a b' scaling=none}",
     Fp8Dots(min_size=4096, exclude="a b", scaling="none")),
    ("fp8-dots{exclude=\"transpose\\\\(\"}", Fp8Dots(exclude="transpose\\(")),
])
def test_options_are_typed_fields(text: str, expected: ModulePass) -> None:
    [parsed] = parse_pipeline(text)
    assert parsed == expected
    assert parse_pipeline(print_pipeline([parsed])) == [parsed]


@pytest.mark.parametrize("make, message", [
    (lambda: Fp8Dots(exclude="["), "invalid exclude pattern '['"),
    (lambda: Rescale(at=("gradients", "weights")),
     "unknown rescale point 'weights' for pass 'rescale' (points: dot-outputs, "),
    (lambda: Scalify(data_dtype="int8"),
     "invalid value 'int8' for option 'data-dtype' of pass 'scalify': expected one of f32, "),
    (lambda: Fp8Dots(scaling="delayed"), "expected one of auto, amax, none"),
    (lambda: parse_pipeline("fp8-dots{exclude=[}"), "invalid exclude pattern '['"),
    (lambda: parse_pipeline("rescale{at=weights}"), "unknown rescale point 'weights'"),
    (lambda: parse_pipeline("fp8-dots{min-size=big}"),
     "invalid value 'big' for option 'min-size' of pass 'fp8-dots': expected an integer"),
    (lambda: parse_pipeline("fp8-dots{size=1}"), "unknown option 'size' for pass 'fp8-dots'"),
    (lambda: parse_pipeline("scalify{data-dtype}"),
     "option 'data-dtype' of pass 'scalify' needs a value"),
])
def test_a_pass_is_validated_when_constructed(make, message: str) -> None:
    with pytest.raises(PipelineError, match=re.escape(message)):
        make()


@pytest.mark.parametrize("policy", [
    Policy(), Policy(data_dtype="float32", fp8_dots=False),
    Policy(rescale_at=("outputs", "gradients"), rescale_method="rms", scale_rounding="up"),
    Policy(fp8_scaling="none", square_encoding="none", min_dot_size=7, exclude="lm|head"),
    Policy(square_dtype="float32", square_rounding="stochastic"),
])
def test_policy_pipeline_is_its_passes_printed(policy: Policy) -> None:
    assert parse_pipeline(policy.pipeline()) == policy.passes()
    assert all(isinstance(p, ModulePass) for p in policy.passes())


def test_compile_scaled_runs_a_policys_pass_objects_without_parsing_text(monkeypatch) -> None:
    """A Policy reaches the rewrite as pass objects: no pipeline text is printed and parsed
    back on the way (the text is kept for reports only)."""
    import jax.numpy as jnp

    from scalify_hlo import api, compile_scaled

    def refuse(text: str) -> None:
        raise AssertionError(f"pipeline text parsed: {text}")

    monkeypatch.setattr(api, "parse_pipeline", refuse)
    policy = Policy(data_dtype="float32", fp8_dots=False)
    step = compile_scaled(lambda x: x * 3.0, jnp.ones(4), policy=policy)
    assert step.pipeline == policy.pipeline()
    assert float(step(*step.scale_args(jnp.ones(4))).unscale()[0]) == 3.0
