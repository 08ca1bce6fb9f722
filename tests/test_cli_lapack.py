"""``scalify-hlo run`` and ``compare`` on steps that call LAPACK (issue 22, section 6).

On CPU, JAX lowers ``jnp.linalg`` and ``jax.scipy.linalg`` to custom calls into LAPACK
(``lapack_spotrf_ffi``, ...). XLA compiles such a module even when LAPACK is not loaded, and
running it then died of a segmentation fault (exit 139, no message); ``compile_scaled`` worked
because JAX loads LAPACK when it runs an exported module. Each function below is exported
in one step (tiny 4x4 matrices); the CLI runs it, and compares it with its exact f32
rewrite, each in a process of its own.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

from scalify_hlo import runner
from scalify_hlo.api import rewrite_text
from scalify_hlo.compile import export
from scalify_hlo.errors import ScalifyError
from tests.helpers import run_cli_many

N = 4
F32_PIPELINE = "inline,scalify{data-dtype=f32},simplify"


def _spd(a: jax.Array) -> jax.Array:
    return a @ a.T + N * jnp.eye(N, dtype=a.dtype)


def _sym(a: jax.Array) -> jax.Array:
    return a + a.T


# Per function, a step on a 4x4 matrix and the LAPACK targets it must call (so that a jax
# that stops lowering one to LAPACK shows here instead of passing without testing anything).
FUNCTIONS: dict[str, tuple[Callable[[jax.Array], object], tuple[str, ...]]] = {
    "cholesky": (lambda a: jnp.linalg.cholesky(_spd(a)), ("potrf",)),
    "qr": (jnp.linalg.qr, ("geqrf", "orgqr")),
    "eigh": (lambda a: jnp.linalg.eigh(_sym(a)), ("syevd",)),
    "svd": (jnp.linalg.svd, ("gesdd",)),
    "lu": (jsl.lu, ("getrf",)),
    "solve": (lambda a: jnp.linalg.solve(_spd(a), a), ("getrf", "trsm")),
    "inv": (lambda a: jnp.linalg.inv(_spd(a)), ("getrf",)),
    "triangular_solve": (lambda a: jsl.solve_triangular(jnp.tril(a) + N * jnp.eye(N), a,
                                                        lower=True), ("trsm",)),
    # eigenvalues of a general matrix are complex: compare their magnitudes
    "eig": (lambda a: jnp.sort(jnp.abs(jnp.linalg.eigvals(a))), ("geev",)),
    "schur": (jsl.schur, ("gees",)),
    "hessenberg": (jsl.hessenberg, ("gehrd",)),
    "qr_pivoting": (lambda a: jsl.qr(a, pivoting=True), ("geqp3",)),
    "tridiagonal": (lambda a: jax.lax.linalg.tridiagonal(_sym(a)), ("sytrd",)),
    "tridiagonal_solve": (lambda a: jax.lax.linalg.tridiagonal_solve(a[0], a[1] + N, a[2], a),
                          ("gtsv",)),
}


def _all_functions(a: jax.Array) -> list[object]:
    return [fn(a) for fn, _ in FUNCTIONS.values()]


def _matrix() -> jax.Array:
    return jnp.asarray(np.random.default_rng(0).standard_normal((N, N)), jnp.float32)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module of a step that calls every function (as ``scalify-hlo export`` writes it)
    and its exact f32 rewrite. One module for all: a CLI process costs about a second of
    imports, and a crash in any call fails every test below."""
    folder = tmp_path_factory.mktemp("lapack")
    text = export(_all_functions, _matrix())
    (folder / "all.mlir").write_text(text)
    (folder / "all.f32.mlir").write_text(rewrite_text(text, F32_PIPELINE))
    return folder


@pytest.fixture(scope="module")
def results(work: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """``run`` and ``compare`` (original against its rewrite), run concurrently."""
    commands = {"run": ("run", work / "all.mlir", "-o", work / "all.npz"),
                "compare": ("compare", work / "all.mlir", work / "all.f32.mlir")}
    return run_cli_many(commands, cwd=work)


@pytest.fixture(scope="module")
def reference() -> list[list[np.ndarray]]:
    """Per function, its outputs from ``jax.jit``."""
    a = _matrix()
    return [[np.asarray(x) for x in jax.tree.leaves(jax.jit(fn)(a))]
            for fn, _ in FUNCTIONS.values()]


def _outputs_of(name: str, reference: list[list[np.ndarray]]) -> range:
    """The indices of function ``name``'s outputs among the module's outputs."""
    index = list(FUNCTIONS).index(name)
    start = sum(len(outputs) for outputs in reference[:index])
    return range(start, start + len(reference[index]))


def _assert_ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stderr == ""


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_run_and_compare_a_lapack_call(work: Path, name: str,
                                       results: dict[str, subprocess.CompletedProcess[str]],
                                       reference: list[list[np.ndarray]]) -> None:
    """The function's LAPACK calls are in the module; ``run`` gives jax.jit's outputs and
    ``compare`` finds the f32 rewrite equal to the original on them."""
    text = (work / "all.mlir").read_text()
    assert set(FUNCTIONS[name][1]) <= set(re.findall(r"custom_call @lapack_[sdcz](\w+)_ffi",
                                                     text))
    _assert_ok(results["run"])
    _assert_ok(results["compare"])
    indices = _outputs_of(name, reference)
    with np.load(work / "all.npz") as saved:
        for index, want in zip(indices, reference[list(FUNCTIONS).index(name)], strict=True):
            np.testing.assert_allclose(saved[f"arr_{index}"], want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"output {index}")
    run_lines = [line for line in results["run"].stdout.splitlines()
                 if line.startswith("output ")]
    rows = {int(row.split()[0]): row.split() for row in results["compare"].stdout.splitlines()
            if row.split() and row.split()[0].isdigit()}
    assert len(run_lines) == len(rows) == sum(len(outputs) for outputs in reference)
    for index in indices:
        assert rows[index][-1] == "0", rows[index]  # no NaN/Inf difference


def test_a_jax_that_cannot_load_lapack_refuses_the_module(
        work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_lapack_initializer", lambda: None)
    with pytest.raises(ScalifyError, match=r"^the module calls LAPACK \(custom call "
                                           r"@lapack_\w+_ffi\) and this jax cannot load "
                                           r"LAPACK outside its own lowering$"):
        runner.compile_module((work / "all.mlir").read_text())
    runner.prepare_custom_calls((work / "all.mlir").read_text(), "cuda")  # not on GPU
