"""Fuzzed inputs for the ``scalify-hlo`` CLI: mutations of real modules, and how a run ends.

Shared by ``tests/test_fuzz.py`` (a bounded run) and ``benchmarks/fuzz.py`` (thousands of
cases). A case is a mutated module (bytes) and a pipeline; it is run as
``scalify-hlo rewrite IN -o OUT [--pipeline P]`` in its own process with a time limit, and
the way the process ended is classified (``Outcome``):

* ``OK``: exit 0, OUT exists and parses as a valid module;
* ``ERROR``: exit 1, stderr is ``warning:`` lines then exactly one ``error:`` line, no
  traceback, OUT absent or untouched (a pre-existing OUT keeps its bytes);
* failures: ``CRASH`` (killed by a signal), ``TRACEBACK`` (``Traceback`` on stderr),
  ``MULTILINE`` (error output that is not one line), ``HANG`` (over the time limit),
  ``PARTIAL`` (OUT missing or not a complete module after a success, or changed / left as a
  temporary file after a failure), ``INTERNAL`` (one clean error line, but one that admits a
  bug: exit 70, an unexpected Python exception the CLI caught, or a pass that reports
  ``internal error: pipeline '...' produced an invalid module``).

Two ways to start the process: ``exec`` runs the installed console script (a fresh
interpreter per case, about 1.3 s of imports each), ``fork`` forks it from a *zygote*, an
interpreter that has imported ``scalify_hlo.cli.main`` once and forks a child per case; the
child runs the CLI's ``main()`` with its own argv and file descriptors and exits through the
normal interpreter shutdown, so crashes at exit are still seen. Both give the same outcomes
(``tests/test_fuzz.py`` checks that on a sample); ``fork`` is about 4x faster. One exception:
heap corruption. A forked child inherits the zygote's warmed-up heap, where a stray write of
MLIR's bytecode reader often lands harmlessly, while a fresh process crashes; so ``fork`` mode
still runs every bytecode input (``ML\xefR`` magic) in a fresh process.
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).parent / "scalify-hlo")
TIMEOUT_S = 10.0
MEMORY_LIMIT_BYTES = 4 << 30  # address space per case: a huge shape must fail, not swap
BYTECODE_MAGIC = b"ML\xefR"
SENTINEL = b"// pre-existing output: a failed run must leave these bytes alone\n"
F32_PIPELINE = "scalify{data-dtype=f32},simplify"
STRICT_PIPELINE = "inline,scalify{data-dtype=f16 strict=true},simplify"
PIPELINES: tuple[str | None, ...] = (None, F32_PIPELINE)  # None: the CLI's default pipeline


class Outcome(StrEnum):
    OK = "OK"
    ERROR = "ERROR"
    CRASH = "CRASH"
    TRACEBACK = "TRACEBACK"
    MULTILINE = "MULTILINE"
    HANG = "HANG"
    PARTIAL = "PARTIAL"
    INTERNAL = "INTERNAL"


FAILURES = frozenset(Outcome) - {Outcome.OK, Outcome.ERROR}


# ----- seeds ---------------------------------------------------------------------------------
_CHECK_LINE_RE = re.compile(r"^\s*//.*$", re.M)


def seed_modules(root: Path = REPO_ROOT) -> list[tuple[str, str]]:
    """(name, text) of every sample step and every chunk of every golden file (comments
    dropped, so that RUN and CHECK lines do not dilute the mutations)."""
    seeds = [(p.name, p.read_text()) for p in sorted((root / "testdata" / "steps").glob("*.mlir"))]
    for path in sorted((root / "testdata" / "golden").rglob("*.mlir")):
        chunks = re.split(r"^// -----.*$", path.read_text(), flags=re.M)
        for index, chunk in enumerate(chunks):
            text = _CHECK_LINE_RE.sub("", chunk).strip()
            if "func.func" in text:
                name = f"{path.relative_to(root / 'testdata' / 'golden')}#{index}"
                seeds.append((name, re.sub(r"\n{2,}", "\n", text) + "\n"))
    return seeds


# ----- mutations -----------------------------------------------------------------------------
Mutation = Callable[[random.Random, str], str | bytes]

_TENSOR_RE = re.compile(r"tensor<((?:\d+x)*)(f32|f16|bf16|f64|i1|i32|i64|ui32)>")
_DIM_RE = re.compile(r"(?<=tensor<)((?:\d+x)*)(\d+)(?=x)")
_UNARY_RE = re.compile(
    r"^(?P<indent>\s*)(?P<res>%[\w#.]+) = stablehlo\.(?P<op>\w+) (?P<arg>%[\w#.]+)"
    r"(?: \{[^}]*\})? : (?P<type>tensor<[^>]*>)(?P<rest>.*)$", re.M)
_BINARY_OPS = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "atan2",
               "remainder", "and")
_UNARY_OPS = ("tanh", "exponential", "log", "sqrt", "rsqrt", "negate", "abs", "logistic",
              "sine", "floor", "sign", "cbrt", "not", "popcnt")
_ARG_RE = re.compile(r"(%arg\d+): (tensor<[^>]*>)")
_ELEMENTS = ("f64", "complex<f32>", "f16", "bf16", "i32", "f8E4M3FN", "i1", "f32", "ui8",
             "complex<f64>", "f4E2M1FN", "index", "none")


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def delete_lines(rng: random.Random, text: str) -> str:
    lines = _lines(text)
    for _ in range(rng.randint(1, 3)):
        if lines:
            del lines[rng.randrange(len(lines))]
    return "".join(lines)


def swap_lines(rng: random.Random, text: str) -> str:
    lines = _lines(text)
    if len(lines) >= 2:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def duplicate_line(rng: random.Random, text: str) -> str:
    lines = _lines(text)
    if lines:
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[i])
    return "".join(lines)


def _replace_nth(rng: random.Random, text: str, pattern: re.Pattern[str],
                 repl: Callable[[re.Match[str]], str], every: bool = False) -> str:
    matches = list(pattern.finditer(text))
    if not matches:
        return text
    if every:
        return pattern.sub(repl, text)
    m = rng.choice(matches)
    return text[:m.start()] + repl(m) + text[m.end():]


def change_element_type(rng: random.Random, text: str) -> str:
    """f32 -> f64 / complex<f32> / ... in one tensor type, or in all of them."""
    new = rng.choice(_ELEMENTS)
    every = rng.random() < 0.3
    return _replace_nth(rng, text, _TENSOR_RE, lambda m: f"tensor<{m.group(1)}{new}>", every)


def change_dimension(rng: random.Random, text: str) -> str:
    """One dimension of one tensor type: another size, 0, dynamic ``?`` or 10^11."""
    size = rng.choice(["0", "1", "3", "7", "?", "?", "100000000000", "4294967296",
                       "9223372036854775807", "-1"])
    return _replace_nth(rng, text, _DIM_RE, lambda m: f"{m.group(1)}{size}")


def dynamic_everywhere(rng: random.Random, text: str) -> str:
    """Every dimension of every tensor type dynamic (``tensor<?x?xf32>``)."""
    return re.sub(r"(?<=tensor<)((?:\d+x)+)",
                  lambda m: "?x" * m.group(1).count("x"), text)


def huge_shapes(rng: random.Random, text: str) -> str:
    """Every tensor type of one shape blown up to 10^11 leading elements (consistently, so
    that the module may still verify)."""
    matches = list(_TENSOR_RE.finditer(text))
    if not matches:
        return text
    shape = rng.choice(matches).group(1)
    huge = rng.choice(["100000000000x", "100000x100000x", "4294967297x"])
    return text.replace(f"tensor<{shape}", f"tensor<{huge}{shape}") if shape else text.replace(
        "tensor<f32>", f"tensor<{huge[:-1]}xf32>")


def truncate(rng: random.Random, text: str) -> str:
    return text[:rng.randrange(len(text) + 1)]


def random_bytes(rng: random.Random, text: str) -> bytes:
    return rng.randbytes(rng.choice([1, 16, 300, 4000]))


def insert_bytes(rng: random.Random, text: str) -> bytes:
    data = text.encode()
    at = rng.randrange(len(data) + 1)
    junk = rng.choice([rng.randbytes(rng.randint(1, 8)), b"\x00", "\u00e9\u2603".encode(),
                       b"\xff\xfe", b"{", b"}", b"(", b"\"", b"<", b">", b"%", b"#"])
    return data[:at] + junk + data[at:]


def flip_chars(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        if chars:
            chars[rng.randrange(len(chars))] = rng.choice("0123456789x<>(){}[]%:,=?@ \n\"-#")
    return "".join(chars)


def bytecode_junk(rng: random.Random, text: str) -> bytes:
    """The bytecode magic followed by junk, or real bytecode truncated or with flipped bytes."""
    kind = rng.randrange(3)
    if kind == 0:
        return BYTECODE_MAGIC + rng.randbytes(rng.randint(0, 256))
    data = bytearray(_bytecode_of(text) or BYTECODE_MAGIC + rng.randbytes(64))
    if kind == 1:
        return bytes(data[:rng.randint(len(BYTECODE_MAGIC), len(data))])
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(BYTECODE_MAGIC), len(data))] = rng.randrange(256)
    return bytes(data)


_BYTECODE_CACHE: dict[int, bytes | None] = {}


def _bytecode_of(text: str) -> bytes | None:
    """MLIR bytecode of a module (cached), or None when the text does not parse."""
    key = hash(text)
    if key not in _BYTECODE_CACHE:
        import io

        from jax.extend.mlir import ir
        from jax.interpreters import mlir as jax_mlir

        try:
            with jax_mlir.make_ir_context(), ir.Location.unknown():
                buffer = io.BytesIO()
                ir.Module.parse(text).operation.write_bytecode(buffer)
                _BYTECODE_CACHE[key] = buffer.getvalue()
        except Exception:
            _BYTECODE_CACHE[key] = None
    return _BYTECODE_CACHE[key]


def replace_op(rng: random.Random, text: str) -> str:
    """A unary op replaced by an unknown-dialect op, an unregistered custom_call, a tuple
    round trip or another unary op."""
    def repl(m: re.Match[str]) -> str:
        indent, res, arg, t = m["indent"], m["res"], m["arg"], m["type"]
        kind = rng.randrange(4)
        if kind == 0:
            return f'{indent}{res} = "fuzz.unknown_op"({arg}) : ({t}) -> {t}'
        if kind == 1:
            target = rng.choice(["fuzz_target", "Sharding", "__cublas$lt$matmul$f8", ""])
            return (f'{indent}{res} = stablehlo.custom_call @{target}({arg}) '
                    f'{{backend_config = ""}} : ({t}) -> {t}')
        if kind == 2:
            tup = f"tuple<{t}>"
            return (f"{indent}%fuzz_tuple = stablehlo.tuple {arg} : {tup}\n"
                    f"{indent}{res} = stablehlo.get_tuple_element %fuzz_tuple[0] : "
                    f"({tup}) -> {t}")
        return f"{indent}{res} = stablehlo.{rng.choice(_UNARY_OPS)} {arg} : {t}"

    return _replace_nth(rng, text, _UNARY_RE, repl)


def swap_op_name(rng: random.Random, text: str) -> str:
    """``stablehlo.X`` -> ``stablehlo.Y`` for an elementwise op."""
    names = [f"stablehlo.{n}" for n in _BINARY_OPS + _UNARY_OPS]
    present = [n for n in names if f"{n} " in text]
    if not present:
        return text
    old = rng.choice(present)
    pool = [n for n in names if (n.split(".")[1] in _BINARY_OPS) == (old.split(".")[1]
                                                                      in _BINARY_OPS)]
    return text.replace(f"{old} ", f"{rng.choice(pool)} ", 1)


def insert_foreign_op(rng: random.Random, text: str) -> str:
    """A new op on the first argument at the start of the entry function: an unknown dialect
    op, an unregistered custom_call, a tuple, or an op of a dialect that is not loaded."""
    m = _ARG_RE.search(text)
    body = text.find("{\n", m.end()) if m else -1
    if m is None or body < 0:
        return text
    arg, t = m.groups()
    line = rng.choice([
        f'  %fuzz = "fuzz.op"({arg}) : ({t}) -> {t}\n',
        f"  %fuzz = stablehlo.custom_call @unregistered_target({arg}) : ({t}) -> {t}\n",
        f'  %fuzz = stablehlo.custom_call @unregistered_target({arg}) {{has_side_effect = true, '
        f'api_version = 4 : i32}} : ({t}) -> {t}\n',
        f"  %fuzz = stablehlo.tuple {arg}, {arg} : tuple<{t}, {t}>\n",
        f"  %fuzz = tosa.abs {arg} : ({t}) -> {t}\n",
        f"  %fuzz = arith.addf {arg}, {arg} : {t}\n",
        f'  %fuzz = "stablehlo.unknown_op"({arg}) : ({t}) -> {t}\n',
    ])
    return text[:body + 2] + line + text[body + 2:]


def tuple_signature(rng: random.Random, text: str) -> str:
    """An argument's type wrapped in a tuple."""
    return _replace_nth(rng, text, _ARG_RE, lambda m: f"{m.group(1)}: tuple<{m.group(2)}>")


def empty_or_blank(rng: random.Random, text: str) -> str:
    return rng.choice(["", " \n\t\n", "module {}\n", "// only a comment\n",
                       "func.func @f() {\n  return\n}\n", "module {\n", "}\n"])


def nested_deep(rng: random.Random, text: str) -> str:
    """Deeply nested modules or brackets (parser recursion)."""
    depth = rng.choice([100, 1000, 20000])
    if rng.random() < 0.5:
        return "module {\n" * depth + "}\n" * depth
    return "func.func @f() -> tensor<" + "tuple<" * depth + "f32" + ">" * depth + "\n"


def huge_constant(rng: random.Random, text: str) -> str:
    """A splat constant of a huge shape, used through the entry function."""
    dims = rng.choice(["100000000000", "65536x65536", "4294967296"])
    return (
        f"func.func public @main(%arg0: tensor<f32>) -> tensor<{dims}xf32> {{\n"
        f"  %0 = stablehlo.constant dense<1.5> : tensor<{dims}xf32>\n"
        f"  %1 = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<f32>) -> "
        f"tensor<{dims}xf32>\n"
        f"  %2 = stablehlo.add %0, %1 : tensor<{dims}xf32>\n"
        f"  return %2 : tensor<{dims}xf32>\n}}\n")


MUTATIONS: dict[str, tuple[Mutation, float]] = {
    # name: (function, relative weight)
    "delete_lines": (delete_lines, 3.0),
    "swap_lines": (swap_lines, 2.0),
    "duplicate_line": (duplicate_line, 1.0),
    "change_element_type": (change_element_type, 3.0),
    "change_dimension": (change_dimension, 3.0),
    "dynamic_everywhere": (dynamic_everywhere, 0.7),
    "huge_shapes": (huge_shapes, 1.0),
    "truncate": (truncate, 2.0),
    "random_bytes": (random_bytes, 0.5),
    "insert_bytes": (insert_bytes, 1.0),
    "flip_chars": (flip_chars, 2.0),
    "bytecode_junk": (bytecode_junk, 1.0),
    "replace_op": (replace_op, 2.5),
    "swap_op_name": (swap_op_name, 2.0),
    "insert_foreign_op": (insert_foreign_op, 1.5),
    "tuple_signature": (tuple_signature, 0.5),
    "empty_or_blank": (empty_or_blank, 0.2),
    "nested_deep": (nested_deep, 0.2),
    "huge_constant": (huge_constant, 0.3),
}
# These replace the whole input, so they make sense only as the last mutation of a case.
_FINAL = {"truncate", "random_bytes", "insert_bytes", "bytecode_junk", "empty_or_blank",
          "nested_deep", "huge_constant"}


@dataclass
class Case:
    """One fuzzed input: which seed, which mutations, which pipeline, and the bytes."""

    index: int
    seed_name: str
    mutations: list[str]
    pipeline: str | None
    data: bytes = field(repr=False)
    preexisting_output: bool = False

    def argv(self, in_path: str, out_path: str) -> list[str]:
        args = ["rewrite", in_path, "-o", out_path]
        return args + (["--pipeline", self.pipeline] if self.pipeline is not None else [])


def make_case(index: int, seed: int, seeds: Sequence[tuple[str, str]]) -> Case:
    """The ``index``-th case of the run with random seed ``seed``: deterministic."""
    rng = random.Random(f"{seed}:{index}")
    seed_name, text = rng.choice(seeds)
    names, weights = zip(*((n, w) for n, (_, w) in MUTATIONS.items()), strict=True)
    applied: list[str] = []
    data: str | bytes = text
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        name = rng.choices(names, weights)[0]
        if isinstance(data, bytes):
            break
        applied.append(name)
        data = MUTATIONS[name][0](rng, data)
        if name in _FINAL:
            break
    pipeline = STRICT_PIPELINE if rng.random() < 0.1 else rng.choice(PIPELINES)
    payload = data if isinstance(data, bytes) else data.encode()
    return Case(index, seed_name, applied, pipeline, payload, rng.random() < 0.5)


def make_cases(count: int, seed: int, start: int = 0) -> list[Case]:
    seeds = seed_modules()
    return [make_case(i, seed, seeds) for i in range(start, start + count)]


# ----- running a case ------------------------------------------------------------------------
@dataclass
class ProcessEnd:
    """How a process ended: its exit code (negative: killed by that signal), or timed out."""

    returncode: int | None
    timed_out: bool = False


def _limit_resources() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_exec(argv: Sequence[str], stdout: Path, stderr: Path, timeout: float) -> ProcessEnd:
    """The installed console script in a fresh interpreter."""
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        proc = subprocess.Popen([CLI, *argv], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, preexec_fn=_limit_resources,
                                start_new_session=True)
        try:
            return ProcessEnd(proc.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return ProcessEnd(None, timed_out=True)


_ZYGOTE_SOURCE = r"""
import json, os, resource, select, signal, sys
import scalify_hlo.cli.main as cli_main

def serve():
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = requests.readline()
        if not line:
            return None
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return request
        fd = os.pidfd_open(pid)
        ready, _, _ = select.select([fd], [], [], request["timeout"])
        timed_out = not ready
        if timed_out:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        code = None if timed_out else os.waitstatus_to_exitcode(status)
        replies.write((json.dumps({"returncode": code, "timed_out": timed_out}) + "\n").encode())
        replies.flush()

request = serve()
if request is None:
    sys.exit(0)
os.setsid()
limit = request["memory"]
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
for fd, path, mode in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY),
                       (2, request["stderr"], os.O_WRONLY)):
    target = os.open(path, mode | (os.O_CREAT | os.O_TRUNC if fd else 0), 0o644)
    os.dup2(target, fd)
    os.close(target)
sys.stdin = open(0, "r", closefd=False)
sys.stdout = open(1, "w", closefd=False)
sys.stderr = open(2, "w", closefd=False)
sys.argv = ["scalify-hlo", *request["argv"]]
sys.exit(cli_main.main())
"""


class Zygote:
    """An interpreter with the CLI imported that forks one child per case."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _ZYGOTE_SOURCE],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     cwd=REPO_ROOT)
        self.lock = threading.Lock()

    def run(self, argv: Sequence[str], stdout: Path, stderr: Path,
            timeout: float) -> ProcessEnd:
        request = {"argv": list(argv), "stdout": str(stdout), "stderr": str(stderr),
                   "timeout": timeout, "memory": MEMORY_LIMIT_BYTES}
        with self.lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError("the fuzz zygote died")
        end = json.loads(reply)
        return ProcessEnd(end["returncode"], end["timed_out"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


@dataclass
class Result:
    """A case's outcome, with what is needed to understand it."""

    index: int
    outcome: Outcome
    seed_name: str
    mutations: list[str]
    pipeline: str | None
    returncode: int | None
    stderr_tail: str
    detail: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _output_parses(path: Path) -> str | None:
    """None when ``path`` holds a valid module, else why not."""
    from scalify_hlo import module_io
    from scalify_hlo.errors import ScalifyError

    try:
        with module_io.ir_context():
            module_io.parse_module(path.read_bytes(), str(path))
    except ScalifyError as exc:
        return str(exc)
    return None


def classify(end: ProcessEnd, stderr: str, out_path: Path, preexisting: bool) -> tuple[
        Outcome, str]:
    """The outcome of one run, and a detail line for the report."""
    leftovers = [p.name for p in out_path.parent.iterdir()
                 if p.name.startswith(f".{out_path.name}.")]
    if end.timed_out:
        return Outcome.HANG, f"no exit within {TIMEOUT_S:g} s"
    assert end.returncode is not None
    if end.returncode < 0:
        return Outcome.CRASH, f"killed by {signal.Signals(-end.returncode).name}"
    if "Traceback" in stderr:
        return Outcome.TRACEBACK, ""
    if leftovers:
        return Outcome.PARTIAL, f"temporary output left behind: {leftovers}"
    lines = stderr.splitlines()
    if end.returncode == 0:
        if not out_path.exists():
            return Outcome.PARTIAL, "exit 0 but no output file"
        if preexisting and out_path.read_bytes() == SENTINEL:
            return Outcome.PARTIAL, "exit 0 but the output file was not written"
        why = _output_parses(out_path)
        if why is not None:
            return Outcome.PARTIAL, f"exit 0 but the output does not parse: {why}"
        if any(not line.startswith("warning:") for line in lines):
            return Outcome.MULTILINE, "exit 0 with stderr lines that are not warnings"
        return Outcome.OK, ""
    if preexisting:
        if not out_path.exists() or out_path.read_bytes() != SENTINEL:
            return Outcome.PARTIAL, "failed run changed the pre-existing output file"
    elif out_path.exists():
        return Outcome.PARTIAL, "failed run left an output file"
    while lines and lines[0].startswith("warning:"):
        lines.pop(0)
    if len(lines) != 1 or not lines[0].startswith("error:"):
        return Outcome.MULTILINE, f"{len(lines)} lines after the warnings"
    if end.returncode == 70 or "internal error" in lines[0]:
        return Outcome.INTERNAL, lines[0]
    if end.returncode != 1:
        return Outcome.MULTILINE, f"exit status {end.returncode} with one error line"
    return Outcome.ERROR, ""


Runner = Callable[[Sequence[str], Path, Path, float], ProcessEnd]


def run_case(case: Case, runner: Runner, workdir: Path, timeout: float = TIMEOUT_S) -> Result:
    """Write the case's input, run the CLI on it, classify, clean up."""
    folder = Path(tempfile.mkdtemp(prefix=f"case{case.index}-", dir=workdir))
    try:
        in_path, out_dir = folder / "in.mlir", folder / "out"
        out_dir.mkdir()
        out_path = out_dir / "out.mlir"
        in_path.write_bytes(case.data)
        if case.preexisting_output:
            out_path.write_bytes(SENTINEL)
        end = runner(case.argv(str(in_path), str(out_path)), folder / "stdout",
                     folder / "stderr", timeout)
        stderr = (folder / "stderr").read_text(errors="replace")
        outcome, detail = classify(end, stderr, out_path, case.preexisting_output)
        stderr = stderr.replace(str(folder), "<case>")
        return Result(case.index, outcome, case.seed_name, case.mutations, case.pipeline,
                      end.returncode, stderr[-2000:], detail)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_cases(cases: Sequence[Case], mode: str = "fork", workers: int = 2,
              timeout: float = TIMEOUT_S,
              progress: Callable[[Result], None] | None = None) -> list[Result]:
    """Run cases in a pool of ``workers`` processes at a time; results in case order."""
    workdir = Path(tempfile.mkdtemp(prefix="scalify-fuzz-"))
    zygotes = [Zygote() for _ in range(workers)] if mode == "fork" else []
    free: list[Zygote] = list(zygotes)
    free_lock = threading.Lock()

    def one(case: Case) -> Result:
        if mode != "fork" or case.data.startswith(BYTECODE_MAGIC):
            result = run_case(case, run_exec, workdir, timeout)
        else:
            with free_lock:
                zygote = free.pop()
            try:
                result = run_case(case, zygote.run, workdir, timeout)
            finally:
                with free_lock:
                    free.append(zygote)
        if progress is not None:
            progress(result)
        return result

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(one, cases))
    finally:
        for zygote in zygotes:
            zygote.close()
        shutil.rmtree(workdir, ignore_errors=True)


def iter_failures(results: Sequence[Result]) -> Iterator[Result]:
    return (r for r in results if r.outcome in FAILURES)


_LOCATION_RE = re.compile(r"^error: (\S*:\d+:\d+: |\S+\.mlir: |<stdin>: )?")


def error_kind(result: Result) -> str:
    """The error line of a failed run with locations, numbers, names and types blanked, so
    that runs failing the same way count together."""
    lines = [line for line in result.stderr_tail.splitlines() if line.startswith("error:")]
    if not lines:
        return ""
    text = _LOCATION_RE.sub("", lines[-1])
    text = re.sub(r"'[^']*'|\"[^\"]*\"|@[\w$.-]+|%[\w#.-]+", "_", text)
    text = re.sub(r"\b\d+\b|tensor<[^>]*>|\([^()]*\)", "_", text)
    return text[:90]


def counts(results: Sequence[Result]) -> dict[str, int]:
    """Outcome -> number of cases, every outcome listed."""
    table = dict.fromkeys((o.value for o in Outcome), 0)
    for result in results:
        table[result.outcome.value] += 1
    return table
