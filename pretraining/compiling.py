"""torch.compile of the transformer body, block by block (regional compilation).

Each block is compiled in place (`nn.Module.compile`), so parameter names, checkpoints and exports
stay those of the eager model. The blocks share one code object and one shape, so Dynamo traces and
Inductor compiles one block and every other block reuses that graph: compile time is that of one
layer instead of all 12-28 (torch's recipe for repeated blocks). The embedding, the rotary tables,
the attention plan (FlexAttention's block mask) and the labelled-position LM head, whose shape
changes with the number of masked tokens, stay eager.
"""

from __future__ import annotations

from torch import nn


def compile_blocks(body: nn.Module) -> int:
    """Compile each block of `body.layers` in place; returns how many were compiled."""
    for block in body.layers:
        block.compile()
    return len(body.layers)
