"""The build record of an Apptainer image (`IMAGE.build.json`): what `make container` built it from
(written by container.build.write_build_record, which imports no package of ours: the same name and
keys are checked by tests/container), read by the preflight of a Slurm submission (reproduce.slurm.preflight)
to refuse an image that does not fit the checkout (issue 53)."""

from __future__ import annotations

from pathlib import Path

BUILD_RECORD_SUFFIX = ".build.json"


def build_record_path(image: Path) -> Path:
    """`IMAGE.build.json`: what the image was built from, read by the submission's preflight."""
    image = Path(image)
    return image.with_name(image.name + BUILD_RECORD_SUFFIX)


RECORD_KEYS = ("commit", "requirements_lock_sha256", "image_bytes", "built")  # what container.build writes
