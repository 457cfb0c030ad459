"""Writing a figure: PNG, PDF, points CSV and a small provenance JSON, each file atomically."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from contracts.provenance import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    git_sha,
    package_versions,
    utc_now,
)


def _render(fig: Figure, fmt: str, dpi: int) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=dpi)
    return buffer.getvalue()


def save_figure(
    fig: Figure,
    points: pd.DataFrame,
    out_dir: str | os.PathLike,
    name: str,
    provenance: dict | None = None,
    dpi: int = 150,
) -> list[Path]:
    """Write <name>.png, <name>.pdf, <name>_points.csv and <name>_meta.json into out_dir."""
    out = Path(out_dir)
    png = _render(fig, "png", dpi)
    engine = fig.get_layout_engine()
    fig.set_layout_engine("none")  # the PNG draw placed the axes: the PDF reuses that layout
    try:
        pdf = _render(fig, "pdf", dpi)
    finally:
        fig.set_layout_engine(engine)
    written = [
        atomic_write_bytes(out / f"{name}.png", png),
        atomic_write_bytes(out / f"{name}.pdf", pdf),
        atomic_write_text(out / f"{name}_points.csv", points.to_csv(index=False)),
    ]
    meta = {
        "figure": name,
        "caption": points.attrs.get("caption", ""),
        "points": len(points),
        "missing_points": int(points["mean"].isna().sum())
        if "mean" in points
        else int(points["std"].isna().sum())
        if "std" in points
        else None,
        "written": utc_now(),
        "git_sha": git_sha(),
        "package_versions": package_versions(),
        **(provenance or {}),
    }
    written.append(atomic_write_json(out / f"{name}_meta.json", meta))
    return written
