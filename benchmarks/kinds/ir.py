"""Retrieval: InfoNCE with in-batch negatives on mean-pooled embeddings, with gradient caching.

Loss = sentence-transformers MultipleNegativesRankingLoss: cosine similarity of every query with
every document of the batch, times `scale` (20, i.e. temperature 0.05), cross-entropy towards the
query's own document (query -> document direction only). Inputs are prefixed "Query: " and
"Document: " (the released loaders' prefixes). Training inputs: under the `paper` protocol every
text ends with EOS and no special tokens are added (the released RetrievalEval.tokenize); under
`standard` the tokenizer's special tokens are used.

Evaluation inputs (`ir_eval_encoding`, docs/protocol.md): `sentence_transformers` (`paper`) encodes
with `SentenceTransformer.encode`, as the released RetrievalEval.encode_sequences does: the saved
retriever loaded by sentence-transformers (`SentenceTransformer(folder)`: its Transformer module
with the tokenizer's own special tokens, e.g. BOS and no EOS, at most `ir_eval_max_length` tokens,
then mean pooling); `as_training` (`standard`) encodes like the training inputs.

The negatives of a query are the documents of the whole batch (32), whatever the device micro-batch.
Gradient caching (Gao et al. 2021, "GradCache") makes that exact: `cached_embed` embeds every
micro-batch without a graph, the loss and its gradient with respect to the embeddings are computed
on the full batch, then each micro-batch is re-embedded with a graph and the cached embedding
gradient is back-propagated through it. It is written as an autograd Function, so the Composer
training step (`loss.backward()`) is unchanged. RNG states are replayed so that dropout masks of
the two passes agree, and the autocast state of the forward pass is restored for the re-run.

On several ranks (benchmarks.finetune: each rank holds its share of the batch) the documents of all
ranks are gathered with gradient (`gather_documents`, torch.distributed.nn's all_gather, whose
backward sums every rank's gradient for a rank's documents), so every query is scored against all
documents of the global batch, as on one rank. The queries need no gathering: a query's loss term
only reads its own embedding. Each rank's loss is the mean over its queries; Composer weighs ranks
by their number of queries and averages their gradients, which gives the global mean's gradient.

Evaluation ranks, for every query, the dataset's candidate pool (benchmarks.datasets: by default
every document named in the validation and test qrels, as released) by cosine similarity of
L2-normalised embeddings and keeps the top `ir_top_k` documents; the one ranking is scored under
both protocols (docs/protocol.md): scikit-learn NDCG on its top 10 (`paper`) and pytrec_eval
NDCG@10 (`standard`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import nn

from benchmarks.kinds.common import Backbone, EvalContext, mean_pool, pad_batch, run_in_batches, tokenize


class _CachedEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, anchor, embed: Callable[[dict], torch.Tensor], chunks: list[dict]):
        device = chunks[0]["input_ids"].device
        ctx.embed, ctx.chunks = embed, chunks
        ctx.autocast = (device.type, torch.is_autocast_enabled(device.type), torch.get_autocast_dtype(device.type))
        ctx.rng = []
        outputs = []
        with torch.no_grad():
            for chunk in chunks:
                ctx.rng.append(_rng_state(device))
                outputs.append(embed(chunk).float())
        return torch.cat(outputs)

    @staticmethod
    def backward(ctx, grad):
        device_type, enabled, dtype = ctx.autocast
        device = ctx.chunks[0]["input_ids"].device
        start = 0
        devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices, device_type=device.type if devices else "cuda"):
            for chunk, rng in zip(ctx.chunks, ctx.rng):
                _set_rng_state(device, rng)
                with torch.enable_grad(), torch.autocast(device_type, dtype=dtype, enabled=enabled):
                    out = ctx.embed(chunk).float()
                n = out.shape[0]
                torch.autograd.backward(out, grad[start : start + n])
                start += n
        return None, None, None


def _rng_state(device: torch.device):
    return (torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None)


def _set_rng_state(device: torch.device, state) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def split_batch(batch: dict, size: int | None) -> list[dict]:
    n = batch["input_ids"].shape[0]
    size = n if not size or size >= n else size
    return [{k: v[i : i + size] for k, v in batch.items()} for i in range(0, n, size)]


def cached_embed(
    embed: Callable[[dict], torch.Tensor], batch: dict, micro_batch: int | None, anchor: torch.Tensor
) -> torch.Tensor:
    """Embeddings of `batch` that back-propagate into `embed`'s parameters one micro-batch at a time.

    `anchor` is any tensor that requires grad (it only makes the output part of the graph).
    """
    chunks = split_batch(batch, micro_batch)
    if not torch.is_grad_enabled() or len(chunks) == 1:
        return torch.cat([embed(chunk).float() for chunk in chunks])
    return _CachedEmbedding.apply(anchor, embed, chunks)


def info_nce(queries: torch.Tensor, documents: torch.Tensor, scale: float, first: int = 0) -> torch.Tensor:
    """MNRL: cross-entropy of scaled cosine similarities; the positive of the i-th query is document
    `first + i` (`first`: where this rank's documents start among the gathered ones)."""
    scores = scale * nn.functional.normalize(queries, dim=-1) @ nn.functional.normalize(documents, dim=-1).T
    return nn.functional.cross_entropy(scores, first + torch.arange(len(scores), device=scores.device))


def gather_documents(documents: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(the documents of every rank in rank order, the index of this rank's first), with gradient; on one
    rank (no process group) the documents as they are. Ranks may hold different numbers (the last,
    shorter batch of an epoch): each is padded to the largest for the all_gather, then cut back."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() == 1:
        return documents, 0
    from torch.distributed.nn.functional import all_gather

    counts = [torch.zeros((), dtype=torch.long, device=documents.device) for _ in range(dist.get_world_size())]
    dist.all_gather(counts, torch.tensor(len(documents), device=documents.device))
    counts = [int(n) for n in counts]
    padded = nn.functional.pad(documents, (0, 0, 0, max(counts) - len(documents)))
    parts = all_gather(padded)
    return torch.cat([part[:n] for part, n in zip(parts, counts)]), sum(counts[: dist.get_rank()])


class BiEncoder(nn.Module):
    def __init__(self, backbone: Backbone, scale: float = 20.0, micro_batch: int | None = None):
        super().__init__()
        self.backbone = backbone
        self.scale = scale
        self.micro_batch = micro_batch

    def embed(self, batch: dict) -> torch.Tensor:
        return mean_pool(self.backbone(batch["input_ids"], batch["attention_mask"]), batch["attention_mask"])

    def forward(self, batch: dict) -> torch.Tensor:
        """InfoNCE of a batch {query_input_ids, query_attention_mask, doc_input_ids, doc_attention_mask}."""
        anchor = torch.zeros((), requires_grad=True)  # only links the cached embeddings to the graph
        q = cached_embed(self.embed, _side(batch, "query"), self.micro_batch, anchor)
        d = cached_embed(self.embed, _side(batch, "doc"), self.micro_batch, anchor)
        documents, first = gather_documents(d)
        return info_nce(q, documents, self.scale, first)


def _side(batch: dict, prefix: str) -> dict:
    return {"input_ids": batch[f"{prefix}_input_ids"], "attention_mask": batch[f"{prefix}_attention_mask"]}


def train_features(
    pairs: Sequence[tuple[str, str]], tokenizer, max_length: int, query_prefix: str, doc_prefix: str, *, protocol: str
) -> list[dict]:
    queries = tokenize(tokenizer, [query_prefix + q for q, _ in pairs], max_length, protocol=protocol)
    docs = tokenize(tokenizer, [doc_prefix + d for _, d in pairs], max_length, protocol=protocol)
    return [{"query": q, "doc": d} for q, d in zip(queries["input_ids"], docs["input_ids"])]


class Collator:
    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, features: Sequence[dict]) -> dict:
        batch = {}
        for side in ("query", "doc"):
            padded = pad_batch([{"input_ids": f[side]} for f in features], self.pad_id)
            batch[f"{side}_input_ids"] = padded["input_ids"]
            batch[f"{side}_attention_mask"] = padded["attention_mask"]
        return batch


def encode_texts(
    model: BiEncoder, texts: Sequence[str], tokenizer, max_length: int, ctx: EvalContext, *, protocol: str
) -> torch.Tensor:
    """L2-normalised embeddings (CPU, float32), one row per text, of the texts tokenised as the
    training inputs (`as_training`); texts are encoded sorted by length."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    enc = tokenize(tokenizer, [texts[i] for i in order], max_length, protocol=protocol)
    features = [{"input_ids": ids} for ids in enc["input_ids"]]
    collate = lambda chunk: pad_batch(chunk, tokenizer.pad_token_id)  # noqa: E731
    embedded = torch.cat(run_in_batches(model.embed, features, collate, ctx))
    out = torch.empty_like(embedded)
    out[torch.tensor(order)] = embedded
    return nn.functional.normalize(out, dim=-1)


class _AsTransformersModel(nn.Module):
    """The trained encoder where sentence-transformers calls its transformers model: forward(
    input_ids, attention_mask, ...) -> last_hidden_state, bidirectional as in training (a decoder
    that the harness makes bidirectional with a 4-D mask would run causally if loaded afresh)."""

    def __init__(self, backbone: Backbone):
        super().__init__()
        self.backbone = backbone
        self.config = backbone.config

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **unused):
        from transformers.modeling_outputs import BaseModelOutput

        return BaseModelOutput(last_hidden_state=self.backbone(input_ids, attention_mask))


def sentence_transformer(model: BiEncoder, model_dir: str, max_seq_length: int, trust_remote_code: bool = False):
    """The retriever as the release evaluates it: `SentenceTransformer(model_dir)` (the saved
    folder: a Transformer module with the saved tokenizer, mean pooling), `max_seq_length` tokens,
    running the trained encoder of `model` (already in memory: the same weights)."""
    from sentence_transformers import SentenceTransformer

    from benchmarks.kinds.checkpoint import register_own_model_types

    register_own_model_types()
    # Its warning that transformers may ignore a config's `is_causal: false` does not apply: the
    # encoder it runs is the harness's, bidirectional (below).
    loader_log = logging.getLogger("sentence_transformers.base.modules.transformer")
    level = loader_log.level
    loader_log.setLevel(logging.ERROR)
    try:
        encoder = SentenceTransformer(str(model_dir), device="cpu", trust_remote_code=trust_remote_code)
    finally:
        loader_log.setLevel(level)
    encoder[0].model = _AsTransformersModel(model.backbone)
    encoder[0].max_seq_length = max_seq_length
    return encoder.to(next(model.parameters()).device)


def st_encode_texts(encoder, texts: Sequence[str], ctx: EvalContext) -> torch.Tensor:
    """L2-normalised embeddings (CPU, float32) by `encoder.encode` (a SentenceTransformer) of the
    texts stripped, as the release's sentence-transformers (3.4.1) strips every text and 5.x no
    longer does."""
    with ctx.autocast():
        embedded = encoder.encode(
            [text.strip() for text in texts],
            batch_size=ctx.batch_size,
            convert_to_tensor=True,
            show_progress_bar=False,
        )
    return nn.functional.normalize(embedded.float().cpu(), dim=-1)


def evaluation_encoder(model: BiEncoder, tokenizer, settings, ctx: EvalContext) -> Callable[[list[str]], torch.Tensor]:
    """texts -> L2-normalised embeddings, as `settings.ir_eval_encoding` encodes evaluation texts."""
    if settings.ir_eval_encoding == "as_training":
        return lambda texts: encode_texts(model, texts, tokenizer, settings.max_length, ctx, protocol=settings.protocol)
    if settings.ir_model_dir is None:
        raise ValueError(
            "ir_eval_encoding sentence_transformers loads the saved retriever: set KindSettings.ir_model_dir"
        )
    max_seq_length = settings.ir_eval_max_length or settings.max_length
    encoder = sentence_transformer(model, settings.ir_model_dir, max_seq_length, settings.trust_remote_code)
    return lambda texts: st_encode_texts(encoder, texts, ctx)


def rank(
    encode: Callable[[list[str]], torch.Tensor],
    queries: dict[str, str],
    documents: dict[str, str],
    query_prefix: str,
    doc_prefix: str,
    top_k: int = 100,
) -> dict[str, dict[str, float]]:
    """Run {query id: {doc id: cosine}} over the top_k documents of `documents` for every query
    (ties ordered as pytrec_eval orders them: benchmarks.metrics.run_from_scores); `encode` gives
    L2-normalised embeddings (`evaluation_encoder`)."""
    from benchmarks.metrics import run_from_scores

    qids, dids = list(queries), list(documents)
    q = encode([query_prefix + queries[i] for i in qids])
    d = encode([doc_prefix + documents[i] for i in dids])
    run = {}
    for start in range(0, len(qids), 512):
        scores = (q[start : start + 512] @ d.T).numpy()
        run.update(run_from_scores(qids[start : start + 512], dids, scores, top_k))
    return run


# --- the task-kind interface (benchmarks.kinds) ---------------------------------------------------


def build_module(backbone: Backbone, data, settings) -> BiEncoder:
    return BiEncoder(backbone, scale=settings.ir_scale, micro_batch=settings.device_microbatch_size)


def training_features(data, tokenizer, settings) -> tuple[list[dict], Collator]:
    pairs = list(zip(data.train["query"], data.train["positive"]))
    features = train_features(
        pairs, tokenizer, settings.max_length, data.spec.query_prefix, data.spec.doc_prefix, protocol=settings.protocol
    )
    return features, Collator(tokenizer.pad_token_id)


def metric_inputs(module, data, role: str, tokenizer, settings, ctx: EvalContext) -> dict:
    """One run {query: {doc: score}} over the candidate pool and the split's qrels, for both protocols."""
    split = data.split(role)
    encode = evaluation_encoder(module, tokenizer, settings, ctx)
    run = rank(encode, split.queries, split.corpus, data.spec.query_prefix, data.spec.doc_prefix, settings.ir_top_k)
    return {"paper": (run, split.qrels), "standard": (run, split.qrels)}


# --- input length of a third-party embedding model (issue 67) ----------------------------------------
CUT_WARN_SHARE = 0.10  # a pinned length that cuts more than this share of the documents is said
CUT_SAMPLE = 2_000  # documents tokenised to estimate that share (the first, in corpus order)


def sentence_transformers_max_length(model: str) -> int | None:
    """The `max_seq_length` a sentence-transformers model folder declares (sentence_bert_config.json),
    None for a folder without one (our exports, a plain transformers model) or a hub id."""
    from contracts.bounded import BoundedReadError, read_json_object

    path = Path(str(model)) / "sentence_bert_config.json"
    if not path.is_file():
        return None
    try:
        value = read_json_object(path).get("max_seq_length")
    except (OSError, BoundedReadError, ValueError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def documents_cut_share(tokenizer, documents: dict[str, str], doc_prefix: str, length: int) -> float:
    """The share of (the first CUT_SAMPLE) documents longer than `length` tokens, special tokens
    included: what a pinned input length cuts off."""
    texts = [doc_prefix + text for text in list(documents.values())[:CUT_SAMPLE]]
    if not texts:
        return 0.0
    lengths = [
        len(ids) for ids in tokenizer(texts, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    ]
    return sum(n > length for n in lengths) / len(lengths)
