"""Step counts as the paper and the release names write them: 42000 -> '42k', toy counts plain."""

from __future__ import annotations


def format_steps(steps: int) -> str:
    """42000 -> '42k'; step counts that are not whole thousands (toy runs) stay plain: 42 -> '42'."""
    return f"{steps // 1000}k" if steps % 1000 == 0 and steps >= 1000 else str(steps)
