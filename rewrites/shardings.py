"""Reading Shardy's ``#sdy.sharding`` attributes: the mesh a sharding names and the axes
that split its dimensions (shared by the manual regions' rules, the signature split and
join-gradients)."""

from __future__ import annotations

import re

from jax.extend.mlir import ir

# The mesh of a sharding: a symbol (``@mesh``) or an inline ``mesh<...>``.
MESH_REF_RE = re.compile(r"#sdy\.sharding<(@[\w.$-]+|mesh<[^>]*>)")


def split_axes(sharding: ir.Attribute) -> set[str] | None:
    """The mesh axes that split some dimension of a ``#sdy.sharding`` (empty: every device
    holds all of it); None where the attribute has no dimension list."""
    text = str(sharding)
    found = MESH_REF_RE.search(text)
    rest = text[found.end():] if found else text
    if "[" not in rest:
        return None
    dims = rest[rest.index("["):rest.index("]") + 1]
    return set(re.findall(r'"([^"]+)"', dims))
