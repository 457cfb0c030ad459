"""benchmarks.run.model_origin: what a fine-tuning record says about its model, for the audit's
question (the checkpoint or the recipe, analysis/recipe.py)."""

from benchmarks.run import model_origin
from contracts.hub import MODEL_MANIFEST


def test_model_origin_reads_the_folder_markers(tmp_path):
    exported, fetched, other = (tmp_path / name for name in ("exported", "fetched", "other"))
    for folder in (exported, fetched, other):
        folder.mkdir()
    (exported / "pretraining.json").write_text("{}")  # python -m pretraining export writes it
    (fetched / MODEL_MANIFEST).write_text("{}")  # python -m pretraining fetch-model writes it
    assert model_origin(exported) == "pretrained"
    assert model_origin(fetched) == "fetched"
    assert model_origin(other) == "other"
    assert model_origin("MLMvsCLM/610m-mlm40-42k") == "other"  # a hub id
    (other / "pretraining.json").mkdir()  # a folder of that name is no marker
    assert model_origin(other) == "other"
