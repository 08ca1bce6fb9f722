"""The bottom module's dtype facts agree with numpy's, and the private MLIR rewrite bindings
fail in one line when a jaxlib moves them."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from scalify_hlo import dtypes, mlir_rewrite
from scalify_hlo.errors import ScalifyError


@pytest.mark.parametrize("name", dtypes.DATA_DTYPES)
def test_data_dtype_facts_match_numpy(name: str) -> None:
    info = ml_dtypes.finfo(dtypes.ELEMENT_DTYPES[name])
    assert dtypes.EXPONENT_RANGES[name] == (info.minexp, info.maxexp - 1)
    assert dtypes.LARGEST_FINITE[name] == float(info.max)
    low, high = dtypes.EXACT_POW2_EXPONENTS[name]
    assert high == info.maxexp - 1 and low >= info.minexp - info.nmant
    assert np.float32(2.0 ** low).astype(dtypes.ELEMENT_DTYPES[name]) == 2.0 ** low
    assert dtypes.ELEMENT_DTYPES[name] in dtypes.DATA_NUMPY_DTYPES


@pytest.mark.parametrize("name", dtypes.FP8_FORMATS)
def test_fp8_facts_match_numpy(name: str) -> None:
    largest = float(ml_dtypes.finfo(dtypes.ELEMENT_DTYPES[name]).max)
    assert dtypes.FP8_MAX[name] == largest
    assert 2.0 ** dtypes.FP8_TOP_EXPONENT[name] <= largest < 2.0 ** (
        dtypes.FP8_TOP_EXPONENT[name] + 2)
    assert name in dtypes.FP8_FORMAT_ALIASES.values()


def test_missing_rewrite_bindings_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mlir_rewrite, "_bindings", None)
    with pytest.raises(ScalifyError, match="jaxlib.mlir._mlir_libs._mlir.rewrite") as error:
        mlir_rewrite.walk_and_apply_patterns(None, {})
    assert "\n" not in str(error.value)
