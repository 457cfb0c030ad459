"""A fine-tuned IR model saved as a sentence-transformers folder gives the harness's embeddings."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks.__main__ import main as cli
from benchmarks.datasets import TOY_DATA_ROOT
from benchmarks.export_st import SENTENCE_TRANSFORMERS_DIR, ExportError, save_sentence_transformer
from benchmarks.kinds import KindSettings
from benchmarks.kinds.common import EvalContext, load_backbone, load_tokenizer
from benchmarks.kinds.ir import BiEncoder, evaluation_encoder
from benchmarks.run import CONFIG_DIR, load_run_config, run
from tests.benchmarks.tiny import one_torch_thread, save_tiny_model  # noqa: F401 (autouse fixture)

QUERIES = ["what is the capital of france", "  how do vaccines work\n", "long " * 200]
DOCUMENTS = ["Paris is the capital of France.", "\nVaccines train the immune system.\n", "a"]


@pytest.fixture(scope="module", params=["standard", "paper"])
def ir_run(tmp_path_factory, request):
    """An MS MARCO run of a tiny model of ours (exported by pretraining), saved for sentence-transformers,
    under each evaluation protocol (they encode inputs differently, docs/protocol.md)."""
    from pretraining.export import save_hf_directory
    from pretraining.modeling import MlmClmForLM
    from pretraining.presets import config_from_preset
    from pretraining.tokenizer import load_tokenizer as pretraining_tokenizer

    root = tmp_path_factory.mktemp("st")
    tokenizer = pretraining_tokenizer("embedded")
    torch.manual_seed(0)
    model = MlmClmForLM(config_from_preset("toy_s", vocab_size=len(tokenizer), is_causal=True))
    base = save_hf_directory(model, None, root / "tiny-clm", tokenizer, {"name": "tiny-clm", "step": 0})
    values = {
        "model": str(base),
        "task": "msmarco",
        "lr": 1e-3,
        "seed": 0,
        "data_root": str(TOY_DATA_ROOT),
        "out": str(root / "runs"),
        "max_steps": 2,
        "max_length": 32,
        "save_sentence_transformers": True,
        "protocol": request.param,
    }
    cfg = load_run_config(values, CONFIG_DIR / "toy.yaml")
    run(cfg)
    return cfg.run_dir


def _harness_embeddings(model_dir, texts, prefix, protocol):
    """The embeddings the run's evaluation computed: under `paper` with sentence-transformers'
    inputs (max_seq_length 32), under `standard` as the training inputs (max_length 32)."""
    encoder = BiEncoder(load_backbone(str(model_dir))).eval()
    settings = KindSettings(max_length=32, protocol=protocol, ir_eval_max_length=32, ir_model_dir=str(model_dir))
    ctx = EvalContext(torch.device("cpu"))
    return evaluation_encoder(encoder, load_tokenizer(str(model_dir)), settings, ctx)([prefix + t for t in texts])


def _cosines(a, b):
    return torch.nn.functional.cosine_similarity(torch.as_tensor(a), torch.as_tensor(b), dim=-1)


def test_sentence_transformers_gives_the_harness_embeddings(ir_run):
    from sentence_transformers import SentenceTransformer

    folder = ir_run / SENTENCE_TRANSFORMERS_DIR
    config = json.loads((folder / "config.json").read_text())
    assert "auto_map" in config and (folder / "modeling_mlmclm.py").is_file()  # loads without our package
    assert (ir_run / "model" / "modeling_mlmclm.py").is_file()
    model = SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")
    protocol = json.loads((ir_run / "record.json").read_text())["protocol"]
    assert model.prompts == {"query": "Query: ", "document": "Document: "}
    # the length the run's evaluation encoded at: paper (sentence-transformers' inputs) the model
    # maximum, not the 99% of the training inputs; standard its max_length
    assert model.max_seq_length == 32
    # Under `paper` the harness strips every text as the release's sentence-transformers (3.4.1)
    # did, and 5.x no longer does: the export gives the harness's embeddings of stripped texts.
    queries = QUERIES if protocol == "standard" else [q.strip() for q in QUERIES]
    documents = DOCUMENTS if protocol == "standard" else [d.strip() for d in DOCUMENTS]
    harness_queries = _harness_embeddings(ir_run / "model", queries, "Query: ", protocol)
    harness_documents = _harness_embeddings(ir_run / "model", documents, "Document: ", protocol)
    assert (_cosines(model.encode_query(queries), harness_queries) >= 0.9999).all()
    assert (_cosines(model.encode_document(documents), harness_documents) >= 0.9999).all()
    if protocol == "paper":  # the first token is the tokenizer's BOS, and no EOS is appended
        features = model[0].preprocess(["Query: " + queries[0]])
        ids = features["input_ids"][0].tolist()
        assert ids[0] == model.tokenizer.bos_token_id and model.tokenizer.eos_token_id not in ids
    card = (folder / "README.md").read_text()
    assert "SentenceTransformer(path, trust_remote_code=True)" in card
    assert "@inproceedings{gisserotboukhlef2026should" in card


def test_the_cli_exports_a_run_and_never_overwrites(ir_run, tmp_path, capsys):
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "st"
    assert cli(["export-st", str(ir_run), str(out)]) == 0
    reference = SentenceTransformer(str(ir_run / SENTENCE_TRANSFORMERS_DIR), trust_remote_code=True, device="cpu")
    exported = SentenceTransformer(str(out), trust_remote_code=True, device="cpu")
    assert torch.equal(
        torch.as_tensor(exported.encode_query(QUERIES)), torch.as_tensor(reference.encode_query(QUERIES))
    )
    assert cli(["export-st", str(ir_run), str(out)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert cli(["export-st", str(tmp_path / "missing"), str(tmp_path / "x")]) == 2
    assert "no record.json" in capsys.readouterr().err


def test_paper_protocol_inputs_are_the_text_and_eos_only(ir_run, tmp_path):
    from sentence_transformers import SentenceTransformer

    out = save_sentence_transformer(ir_run / "model", tmp_path / "eos", 8, "Query: ", "Document: ", eos_only=True)
    model = SentenceTransformer(str(out), trust_remote_code=True, device="cpu")
    tokenizer = load_tokenizer(str(ir_run / "model"))
    features = model[0].preprocess(["Query: " + QUERIES[0], "Query: " + QUERIES[2]])
    for row, mask, text in zip(features["input_ids"], features["attention_mask"], QUERIES[::2]):
        plain = tokenizer("Query: " + text, add_special_tokens=False)["input_ids"]
        assert row[mask.bool()].tolist() == plain[:7] + [tokenizer.eos_token_id]  # truncated to 8 with eos


def test_a_decoder_made_bidirectional_by_the_harness_cannot_be_exported(tmp_path):
    llama = save_tiny_model(tmp_path / "llama", "llama")
    with pytest.raises(ExportError, match="module by module"):
        save_sentence_transformer(llama, tmp_path / "st", 32, "Query: ", "Document: ")
    assert not (tmp_path / "st").exists()


def test_a_run_whose_model_was_removed_points_to_its_own_export(ir_run, tmp_path, capsys):
    """save_sentence_transformers alone: the run's model/ goes once nq and mldr_en are evaluated;
    export-st then names the sentence-transformers folder the run wrote (issue 90: it advised the
    very switch the run had used)."""
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(ir_run, run_dir)
    shutil.rmtree(run_dir / "model")
    assert cli(["export-st", str(run_dir), str(tmp_path / "st")]) == 2
    err = capsys.readouterr().err
    assert f"use {run_dir / SENTENCE_TRANSFORMERS_DIR}" in err and "nothing written" in err
    assert not (tmp_path / "st").exists()
    shutil.rmtree(run_dir / SENTENCE_TRANSFORMERS_DIR)
    assert cli(["export-st", str(run_dir), str(tmp_path / "st")]) == 2
    assert "rerun it with save_weights: true" in capsys.readouterr().err
