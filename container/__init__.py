"""Apptainer image of the reproducibility package: definition, build and checks (not a pipeline stage)."""
