"""A fine-tuned IR model as a sentence-transformers model (docs/export.md).

The folder holds the trained encoder and its tokenizer (sentence-transformers' Transformer
module), mean pooling over the real tokens, prompt included (benchmarks.kinds.ir.BiEncoder.embed),
and L2 normalisation (the harness ranks by cosine similarity of normalised embeddings). The
harness's "Query: " / "Document: " prefixes are the prompts "query" and "document", which
`encode_query` / `encode_document` prepend. Inputs are tokenised as the harness tokenised its
evaluation inputs (`export_inputs`): with the tokenizer's own special tokens up to the model
maximum where the run encoded with sentence-transformers (`ir_eval_encoding`, the `paper`
default), else as in training (the same tokenizer object, truncated at the run's max_length);
right-padded (positions must not move), text only (never a chat template).

`SentenceTransformer(folder)` loads it. A model whose code ships in the folder needs
`SentenceTransformer(folder, trust_remote_code=True)`: ours (modeling_mlmclm.py) or a remote-code
checkpoint's, because sentence-transformers loads the encoder with transformers' AutoModel, which
runs shipped code only when asked to.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from contracts.bounded import SMALL, BoundedReadError, read_json_object
from contracts.provenance import atomic_write_text

SENTENCE_TRANSFORMERS_DIR = "sentence_transformers"  # beside model/ in an MS MARCO run directory
_TEXT_ONLY = {"text": {"method": "forward", "method_output_name": "last_hidden_state"}}


class ExportError(ValueError):
    """A run or model that cannot be exported; one line saying why."""


def needs_remote_code(folder: Path) -> bool:
    try:
        return "auto_map" in read_json_object(Path(folder) / "config.json", SMALL)
    except BoundedReadError as exc:
        raise ExportError(str(exc)) from None


def append_eos_only(tokenizer) -> None:
    """Make `tokenizer` add the EOS token after the text and no other special token (the paper
    protocol's inputs, docs/benchmarks.md); truncation then keeps max_length - 1 text tokens."""
    from tokenizers.processors import TemplateProcessing

    eos, eos_id = tokenizer.eos_token, tokenizer.eos_token_id
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, eos_id)]
    )


def export_inputs(protocol: str, ir_eval_encoding: str, max_length: int, eval_max_length: int) -> tuple[int, bool]:
    """(max_seq_length, eos_only) of an export: the inputs its run evaluated the retriever with
    (docs/protocol.md, `ir_eval_encoding`): sentence-transformers' own (the tokenizer's special
    tokens, up to the model maximum) or the training inputs (`paper`: text + EOS, 99% of it)."""
    if ir_eval_encoding == "sentence_transformers":
        return eval_max_length, False
    return max_length, protocol == "paper"


def run_export_inputs(config: dict, provenance: dict) -> tuple[int, bool]:
    """`export_inputs` of a complete run from its config.yaml and record provenance (a record
    written before `ir_eval_encoding` existed encoded evaluation texts as trained)."""
    choices = provenance.get("protocol_choices") or {}
    encoding = choices.get("ir_eval_encoding") or "as_training"
    eval_max_length = choices.get("ir_eval_max_length") or provenance["max_length"]
    return export_inputs(config.get("protocol", "paper"), encoding, provenance["max_length"], eval_max_length)


def _check_eos_only(folder: Path) -> None:
    """The saved tokenizer, loaded again, adds EOS only (some tokenizer classes rebuild their
    post-processor from their own settings when they load)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    probe = "Query: a probe"
    text_then_eos = tokenizer(probe, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    if tokenizer(probe)["input_ids"] != text_then_eos:
        raise ExportError(
            f"tokenizer class {type(tokenizer).__name__} does not keep an EOS-only "
            "post-processor when saved; this model cannot be exported for the paper protocol"
        )


def save_sentence_transformer(
    model_dir: Path,
    out: Path,
    max_length: int,
    query_prefix: str,
    doc_prefix: str,
    trust_remote_code: bool = False,
    eos_only: bool = False,
) -> Path:
    """Write the sentence-transformers folder `out` (aside, then renamed) from a saved IR model."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling, Transformer

    from benchmarks.kinds.checkpoint import check_remote_code, register_own_model_types, ship_own_model_code
    from benchmarks.kinds.common import load_tokenizer, make_bidirectional

    model_dir, out = Path(model_dir), Path(out)
    if out.exists():
        raise ExportError(f"{out} exists; refusing to overwrite an export")
    register_own_model_types()
    check_remote_code(str(model_dir), trust_remote_code)
    remote = {"trust_remote_code": trust_remote_code}
    encoder = Transformer(
        str(model_dir),
        model_kwargs=remote,
        config_kwargs=remote,
        processor_kwargs=remote,
        modality_config=_TEXT_ONLY,
        module_output_name="token_embeddings",
    )
    if make_bidirectional(encoder.auto_model):
        raise ExportError(
            f"{model_dir}: model_type {encoder.auto_model.config.model_type!r} is a decoder that "
            "the harness makes bidirectional module by module; a saved model cannot carry "
            "that, so sentence-transformers would run it causally"
        )
    tokenizer = load_tokenizer(str(model_dir), trust_remote_code)  # what the harness encodes with
    tokenizer.model_max_length = max_length
    tokenizer.padding_side = "right"
    if eos_only:
        append_eos_only(tokenizer)
    encoder.processor = tokenizer
    model = SentenceTransformer(
        modules=[encoder, Pooling(encoder.get_embedding_dimension(), pooling_mode="mean"), Normalize()],
        prompts={"query": query_prefix, "document": doc_prefix},
        similarity_fn_name="cosine",
        device="cpu",
    )
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save(str(tmp), create_model_card=False)
    ship_own_model_code(tmp)
    if eos_only:
        _check_eos_only(tmp)
    atomic_write_text(
        tmp / "README.md",
        _model_card(model_dir, max_length, query_prefix, doc_prefix, needs_remote_code(tmp), eos_only),
    )
    tmp.rename(out)
    return out


def _model_card(
    model_dir: Path, max_length: int, query_prefix: str, doc_prefix: str, remote: bool, eos_only: bool
) -> str:
    from contracts.citation import bibtex

    load = "SentenceTransformer(path, trust_remote_code=True)" if remote else "SentenceTransformer(path)"
    tokens = (
        "the text followed by the EOS token, no other special token"
        if eos_only
        else "the tokenizer's own special tokens"
    )
    return "\n".join(
        [
            "---",
            "library_name: sentence-transformers",
            "pipeline_tag: sentence-similarity",
            "tags: [mlm-vs-clm, sentence-transformers, retrieval]",
            "---",
            "",
            "# Retriever fine-tuned on MS MARCO pairs by the mlm-vs-clm harness",
            "",
            f"Exported from `{model_dir}`: InfoNCE with in-batch negatives, mean pooling, cosine similarity. "
            f"Inputs: {tokens}, at most {max_length} tokens.",
            "",
            "```python",
            "from sentence_transformers import SentenceTransformer",
            "",
            'path = "path/to/this/folder"',
            f"model = {load}",
            f'queries = model.encode_query(["what is a masked language model"])  # prompt {query_prefix!r}',
            f'documents = model.encode_document(["A masked language model predicts ..."])  # prompt {doc_prefix!r}',
            "scores = model.similarity(queries, documents)",
            "```",
            "",
            "`trust_remote_code=True` is needed when the model code ships in this folder (config.json "
            "`auto_map`): transformers runs shipped code only when asked to.",
            "",
            "## Citation",
            "",
            "```bibtex",
            bibtex(),
            "```",
            "",
        ]
    )
