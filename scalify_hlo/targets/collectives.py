"""The collectives of an optimized HLO module on one chain: what a sharded step waits for.

XLA combines collectives that do not depend on each other into one; a collective whose
operand depends on another one's result has to wait for it. A step's run-time scales taken
from sharded tensors (each a max all-reduce) decide the data the next one measures, so how
many collectives a step pays for in latency is the longest such chain, which a count alone
does not show (benchmarks/sharded.py reports both).
"""

from __future__ import annotations

import re

# What XLA prints for a collective, its async start included (a ``-done`` waits for the
# start it names: the chain passes through it without counting again).
_COLLECTIVE = re.compile(r"\b(all-reduce|all-gather|reduce-scatter|all-to-all|"
                         r"collective-permute|collective-broadcast|ragged-all-to-all)"
                         r"(-start)?\(")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?(%[\w.\-]+)\s*=\s*(.*)$")
_OPERAND = re.compile(r"%[\w.\-]+")


def serial_collectives(hlo_text: str) -> int:
    """The most collectives on one data path of the ENTRY computation of optimized HLO
    text (collectives inside loop bodies and called computations are not followed)."""
    start = hlo_text.find("\nENTRY")
    if start < 0:
        return 0
    depth: dict[str, int] = {}
    longest = 0
    for line in hlo_text[start:].splitlines()[1:]:
        if line.startswith("}"):
            break
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        name, rest = match.groups()
        opcode_and_operands = rest.split("(", 1)
        operands = opcode_and_operands[1] if len(opcode_and_operands) > 1 else ""
        here = max((depth.get(o, 0) for o in _OPERAND.findall(operands)), default=0)
        if _COLLECTIVE.search(rest):
            here += 1
        depth[name] = here
        longest = max(longest, here)
    return longest
