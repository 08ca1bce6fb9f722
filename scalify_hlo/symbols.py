"""Looking up functions of a module by symbol name."""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.errors import RewriteError

# The attribute of a scaled entry function that lists its scale arguments (an i64 array of
# argument indices, each the scale of the argument before it), so that a host running the
# module alone (scalify-hlo run) can check and split the scales it is given
# (docs/scaled-signature.md). On the function, not its arguments: the signature reads as
# it did.
SCALE_ARGS_ATTR = "scalify.scale_args"
# The attribute of an entry function whose rescale points are delayed: how many exponents it
# returns last (and, under ``delayed-statistics=use``, takes last): see
# rewrites/delayed_statistics.py.
DELAYED_ATTR = "scalify.delayed_exponents"


def partition_count(module: ir.Module) -> int:
    """The module's ``mhlo.num_partitions``, how many devices JAX's SPMD partitioner splits it
    over (what ``jax.jit`` of a sharded step lowers to); 1 when it has none."""
    attributes = module.operation.attributes
    if "mhlo.num_partitions" not in attributes:
        return 1
    return max(1, ir.IntegerAttr(attributes["mhlo.num_partitions"]).value)


def function_name(func: ir.Operation) -> str:
    return ir.StringAttr(func.attributes["sym_name"]).value


def functions_by_name(module: ir.Module) -> dict[str, ir.Operation]:
    return {
        function_name(op.operation): op.operation
        for op in module.body.operations
        if op.operation.name == "func.func"
    }


def entry_function(module: ir.Module) -> ir.Operation:
    """The public ``main`` function, or the only public function when there is no ``main``."""
    functions = functions_by_name(module)
    if "main" in functions:
        return functions["main"]
    public = [
        f for f in functions.values()
        if "sym_visibility" not in f.attributes
        or ir.StringAttr(f.attributes["sym_visibility"]).value == "public"
    ]
    if len(public) == 1:
        return public[0]
    raise RewriteError("module has no @main and no single public function to rewrite")
