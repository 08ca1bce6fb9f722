"""The ``inline`` pass: inline every ``func.call`` to a function defined in the module.

MLIR's built-in inliner leaves JAX's private calls in place when driven through jaxlib's
bindings, so this clones callee bodies from Python. Inlined ops get the location
``callsite(callee_loc at call_loc)`` as MLIR's inliner does, which keeps JAX's name stack
(``transpose(jvp(...))`` marks the backward pass) visible to later passes.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from scalify_hlo.errors import RewriteError
from scalify_hlo.rewrites.emitter import ops_named
from scalify_hlo.rewrites.mlir_passes import run_mlir_pipeline
from scalify_hlo.rewrites.registry import ModulePass, PassContext, register
from scalify_hlo.symbols import functions_by_name

MAX_INLINE_DEPTH = 64


def _calls_in(op: ir.Operation) -> list[ir.Operation]:
    return ops_named(op, "func.call")


def _remap_operands(op: ir.Operation, mapping: dict[ir.Value, ir.Value]) -> None:
    """Point operands of ``op`` and of ops nested in it at their mapped values."""

    def visit(inner: ir.Operation) -> ir.WalkResult:
        for index, operand in enumerate(inner.operands):
            replacement = mapping.get(operand)
            if replacement is not None:
                inner.operands[index] = replacement
        return ir.WalkResult.ADVANCE

    op.walk(visit)


def _set_call_site_locations(op: ir.Operation, call_loc: ir.Location) -> None:
    def visit(inner: ir.Operation) -> ir.WalkResult:
        inner.location = ir.Location.callsite(inner.location, [call_loc])
        return ir.WalkResult.ADVANCE

    op.walk(visit)


def inline_call(call: ir.Operation, callee: ir.Operation) -> None:
    """Replace one call by a copy of the callee's single-block body."""
    body = callee.regions[0].blocks[0]
    mapping: dict[ir.Value, ir.Value] = dict(zip(body.arguments, call.operands, strict=True))
    insertion = ir.InsertionPoint(call)
    results: list[ir.Value] | None = None
    for op in body.operations:
        op = op.operation
        if op.name == "func.return":
            results = [mapping.get(v, v) for v in op.operands]
            break
        clone = op.clone(ip=insertion)
        _remap_operands(clone, mapping)
        _set_call_site_locations(clone, call.location)
        mapping.update(zip(op.results, clone.results, strict=True))
    if results is None:
        raise RewriteError(f"function '{_callee_name(call)}' has no func.return to inline")
    for old, new in zip(call.results, results, strict=True):
        old.replace_all_uses_with(new)
    call.erase()


def _callee_name(call: ir.Operation) -> str:
    return ir.FlatSymbolRefAttr(call.attributes["callee"]).value


def _callees(functions: dict[str, ir.Operation]) -> dict[str, set[str]]:
    """The names each function calls."""
    return {name: {_callee_name(c) for c in _calls_in(func)} for name, func in
            functions.items()}


def _check_no_recursion(callees: dict[str, set[str]]) -> None:
    """Refuse call cycles up front: inlining one would grow the module exponentially."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str) -> None:
        state[name] = 1
        for callee in callees.get(name, ()):
            if state.get(callee) == 1:
                raise RewriteError(f"recursive call: '@{name}' calls '@{callee}' which "
                                   f"leads back to it; recursion cannot be inlined")
            if callee in callees and state.get(callee) is None:
                visit(callee)
        state[name] = 2

    for name in callees:
        if state.get(name) is None:
            visit(name)


def inline_calls(module: ir.Module) -> int:
    """Inline calls until none is left; returns how many were inlined."""
    functions = functions_by_name(module)
    callees = _callees(functions)
    _check_no_recursion(callees)
    if not any(callees.values()):  # no call in any function: skip walking the module again
        return 0
    inlined = 0
    for _ in range(MAX_INLINE_DEPTH):
        calls = _calls_in(module.operation)
        if not calls:
            return inlined
        for call in calls:
            name = _callee_name(call)
            callee = functions.get(name)
            if callee is None:
                raise RewriteError(f"call to undefined function '@{name}'")
            if len(callee.regions[0].blocks) != 1:
                raise RewriteError(f"cannot inline '@{name}': its body has several blocks")
            inline_call(call, callee)
            inlined += 1
    raise RewriteError(f"calls nested deeper than {MAX_INLINE_DEPTH} levels (recursion?)")


def may_have_dead_symbols(module: ir.Module) -> bool:
    """Whether ``symbol-dce`` could remove anything: False when the module holds only public
    functions (the usual case once calls are inlined), which nothing can discard. The pass
    walks every op and its attributes for symbol uses even then, so it is worth skipping on
    a large module; anything else at the top level counts as a maybe."""
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func":
            return True
        attributes = op.attributes
        if ("sym_visibility" in attributes
                and ir.StringAttr(attributes["sym_visibility"]).value != "public"):
            return True
    return False


def remove_unused_private_functions(module: ir.Module) -> None:
    """Drop private functions nothing refers to any more; MLIR's symbol-dce also sees
    references from attributes (a composite's decomposition, say)."""
    if may_have_dead_symbols(module):
        run_mlir_pipeline(module, "symbol-dce")


@register("inline",
          "Inline every func.call to a function of the module and drop unused private functions "
          "(JAX's private calls included).")
class Inline(ModulePass):
    """Scalify rewrites one function: JAX's private calls (``jnp`` helpers, custom_jvp
    bodies) are cloned into their callers first, their name stack kept in the locations."""

    def apply(self, module: ir.Module, context: PassContext) -> None:
        context.bump("inline.calls-inlined", inline_calls(module))
        remove_unused_private_functions(module)
