"""Task kinds: bidirectional attention, GradCache, QA windows and post-processing, TC alignment,
IR evaluation encoding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.kinds import KindSettings, ir, qa, tc
from benchmarks.kinds.checkpoint import ModelLoadError, check_model_path
from benchmarks.kinds.common import EvalContext, load_backbone, load_tokenizer, mean_pool
from benchmarks.protocol_deltas import llama3_style_tokenizer
from tests.benchmarks.tiny import minilm_dir, one_torch_thread, save_tiny_model  # noqa: F401 (autouse fixture)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(str(minilm_dir()))


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_kinds")
    return {arch: save_tiny_model(root / arch, arch) for arch in ("bert", "llama")}


# --- bidirectional attention --------------------------------------------------------------------


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_llama_is_made_bidirectional(tiny_dirs, impl):
    backbone = load_backbone(str(tiny_dirs["llama"]), attn_implementation=impl).eval()
    assert backbone.needs_4d_mask
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 102, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0]])
    changed = ids.clone()
    changed[0, 4] = 4937  # a later token
    with torch.no_grad():
        first, second = backbone(ids, mask), backbone(changed, mask)
        unpadded = backbone(ids[:, :6], mask[:, :6])
    assert (first[0, 0] - second[0, 0]).abs().max() > 1e-4, "position 0 must see later tokens"
    assert torch.allclose(first[0, :6], unpadded[0], atol=1e-5), "padding must not change real positions"


def test_a_causal_reference_does_not_see_the_future(tiny_dirs):
    """The same check on the unmodified model fails: the test above measures bidirectionality."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(tiny_dirs["llama"]).eval()
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 102]])
    changed = ids.clone()
    changed[0, 4] = 4937
    with torch.no_grad():
        a, b = model(ids).last_hidden_state, model(changed).last_hidden_state
    assert torch.allclose(a[0, 0], b[0, 0])


def test_our_own_clm_model_type_is_made_bidirectional(tmp_path):
    """`mlmclm_llama` (pretraining.modeling) reads `config.is_causal`; a CLM export has it True."""
    modeling = pytest.importorskip("pretraining.modeling")
    config = modeling.MlmClmConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        is_causal=True,
    )
    torch.manual_seed(0)
    modeling.MlmClmForLM(config).save_pretrained(tmp_path)
    backbone = load_backbone(str(tmp_path)).eval()
    assert backbone.model.config.is_causal is False
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    changed = ids.clone()
    changed[0, 4] = 11
    with torch.no_grad():
        diff = (backbone(ids, torch.ones_like(ids))[0, 0] - backbone(changed, torch.ones_like(ids))[0, 0]).abs().max()
    assert diff > 1e-4


def test_bert_stays_bidirectional_and_mean_pool_ignores_padding(tiny_dirs):
    backbone = load_backbone(str(tiny_dirs["bert"])).eval()
    assert not backbone.needs_4d_mask
    hidden = torch.randn(2, 4, 3)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    pooled = mean_pool(hidden, mask)
    assert torch.allclose(pooled[0], hidden[0, :2].mean(0)) and torch.allclose(pooled[1], hidden[1].mean(0))


def test_model_folder_without_weights_is_a_clear_error(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match="has no weights"):
        check_model_path(str(tmp_path))
    with pytest.raises(ModelLoadError, match="does not exist"):
        check_model_path(str(tmp_path / "missing"))


# --- IR: InfoNCE and gradient caching -----------------------------------------------------------


def test_info_nce_is_scaled_cosine_cross_entropy():
    q, d = torch.randn(4, 8), torch.randn(4, 8)
    cos = torch.nn.functional.cosine_similarity(q[:, None], d[None], dim=-1)
    expected = torch.nn.functional.cross_entropy(20 * cos, torch.arange(4))
    assert torch.allclose(ir.info_nce(q, d, 20.0), expected, atol=1e-6)


def _ir_batch(n: int) -> dict:
    g = torch.Generator().manual_seed(1)
    batch = {
        "query_input_ids": torch.randint(1000, 5000, (n, 7), generator=g),
        "query_attention_mask": torch.ones(n, 7, dtype=torch.long),
        "doc_input_ids": torch.randint(1000, 5000, (n, 12), generator=g),
        "doc_attention_mask": torch.ones(n, 12, dtype=torch.long),
    }
    batch["doc_attention_mask"][::2, 9:] = 0  # some padding
    return batch


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_grad_cache_gradients_equal_full_batch_gradients(tiny_dirs, arch):
    batch = _ir_batch(8)
    grads, losses = [], []
    for micro_batch in (None, 3):  # 3 does not divide 8: uneven last chunk
        model = ir.BiEncoder(load_backbone(str(tiny_dirs[arch])), micro_batch=micro_batch).train()
        loss = model(batch)
        loss.backward()
        losses.append(loss.item())
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert losses[0] == pytest.approx(losses[1], abs=1e-6)
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 10
    for name in grads[0]:
        assert torch.allclose(grads[0][name], grads[1][name], atol=1e-5, rtol=1e-4), name


def test_grad_cache_replays_dropout(tiny_dirs, tmp_path):
    """With dropout on, the re-run of each chunk must see the dropout masks of the cached pass:
    then GradCache's gradient equals the gradient of the loss it reports."""
    path = save_tiny_model(tmp_path / "drop", "bert", dropout=0.3)
    batch = _ir_batch(6)
    model = ir.BiEncoder(load_backbone(str(path)), micro_batch=2).train()
    torch.manual_seed(5)
    model(batch).backward()
    cached = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    torch.manual_seed(5)  # same masks, computed chunk by chunk in one graph
    chunks = ir.split_batch(ir._side(batch, "query"), 2)
    q = torch.cat([model.embed(c) for c in chunks])
    d = torch.cat([model.embed(c) for c in ir.split_batch(ir._side(batch, "doc"), 2)])
    ir.info_nce(q, d, 20.0).backward()
    for name, grad in cached.items():
        assert torch.allclose(grad, dict(model.named_parameters())[name].grad, atol=1e-5, rtol=1e-4), name


# --- QA -----------------------------------------------------------------------------------------


def _feature(example_index, offsets):
    return {"example_index": example_index, "offsets": offsets, "input_ids": list(range(len(offsets)))}


def test_qa_postprocess_takes_the_best_span_over_windows():
    context = "alpha beta gamma delta epsilon"
    example = qa.QAExample("q", "which?", context, ("delta",), (17,))
    # window 1 covers "alpha beta gamma", window 2 "gamma delta epsilon"; index 0 = CLS, 1 = question
    w1 = [None, None, (0, 5), (6, 10), (11, 16)]
    w2 = [None, None, (11, 16), (17, 22), (23, 30)]
    starts = [np.array([0.0, 9, 1.0, 0.5, 0.2]), np.array([0.0, 9, 0.1, 3.0, 0.3])]
    ends = [np.array([0.0, 9, 0.9, 0.4, 0.1]), np.array([0.0, 9, 0.1, 2.5, 0.2])]
    features = [_feature(0, w1), _feature(0, w2)]
    assert qa.postprocess([example], features, starts, ends) == ["delta"]
    # a longer span wins when its start+end is higher; max_answer_length forbids it
    ends[1][4] = 5.0
    assert qa.postprocess([example], features, starts, ends) == ["delta epsilon"]
    assert qa.postprocess([example], features, starts, ends, max_answer_length=1) == ["delta"]
    # question tokens (offset None) are never part of an answer even with the highest logits
    assert "which" not in qa.postprocess([example], features, starts, ends)[0]


def test_qa_no_answer_decision():
    context = "alpha beta gamma"
    example = qa.QAExample("q", "which?", context, (), ())
    offsets = [None, None, (0, 5), (6, 10), (11, 16)]
    features = [_feature(0, offsets), _feature(0, offsets)]
    starts = [np.array([4.0, 0, 1.0, 0.5, 0.2]), np.array([0.5, 0, 1.0, 0.5, 0.2])]
    ends = [np.array([4.0, 0, 1.0, 0.4, 0.1]), np.array([0.5, 0, 1.0, 0.4, 0.1])]
    # null score = min over windows = 1.0 < best span 2.0: answer
    assert qa.postprocess([example], features, starts, ends, version_2=True) == ["alpha"]
    starts[1][0] = ends[1][0] = 3.0  # null 6 > span 2: no answer
    assert qa.postprocess([example], features, starts, ends, version_2=True) == [""]
    assert qa.postprocess([example], features, starts, ends, version_2=True, null_score_diff_threshold=5.0) == ["alpha"]
    assert qa.postprocess([example], features, starts, ends, version_2=False) == ["alpha"]


def test_qa_windows_label_a_straddling_answer_only_where_it_fits(tokenizer):
    words = [f"w{i}" for i in range(40)]
    context = " ".join(words)
    answer = "w20 w21 w22"
    example = qa.QAExample("q", "where?", context, (answer,), (context.index(answer),))
    features = qa.train_features([example], tokenizer, max_length=24, doc_stride=8)
    assert len(features) > 2, "a long context becomes several windows"
    positives = [f for f in features if f["start_positions"] > 0]
    negatives = [f for f in features if f["start_positions"] == 0]
    assert positives and negatives
    for feat in positives:
        span = feat["input_ids"][feat["start_positions"] : feat["end_positions"] + 1]
        assert tokenizer.decode(span) == answer
    for feat in negatives:
        assert feat["end_positions"] == 0
    # at least one window holds part of the answer but not all of it (straddles its edge)
    text = [tokenizer.decode(f["input_ids"]) for f in negatives]
    assert any(("w20" in t or "w22" in t) and answer not in t for t in text)


def test_qa_eval_features_mark_only_context_offsets(tokenizer):
    example = qa.QAExample("q", "where is it?", "it is here", ("here",), (6,))
    (feat,) = qa.eval_features([example], tokenizer, max_length=32, doc_stride=8)
    context_offsets = [o for o in feat["offsets"] if o is not None]
    assert [example.context[s:e] for s, e in context_offsets] == ["it", "is", "here"]


def test_record_cast_uses_the_first_mention_of_a_gold_entity():
    passage = "Acme Corp hired Alice Smith in Berlin.\n@highlight\nAlice Smith joins Acme Corp"
    row = {
        "passage": passage,
        "query": "@placeholder announced the hire.",
        "entities": ["Acme Corp", "Alice Smith", "Berlin"],
        "entity_spans": {
            "text": ["Acme Corp", "Alice Smith", "Berlin", "Alice Smith", "Acme Corp"],
            "start": [0, 16, 31, 50, 68],
            "end": [9, 27, 37, 61, 77],
        },
        "answers": ["Alice Smith"],
        "idx": {"passage": 3, "query": 7},
    }
    example = qa.record_to_example(row, 0)
    assert example.answer_starts == (16,) and passage[16:27] == "Alice Smith"
    assert example.question.startswith("@placeholder") and example.id == "3-7"
    # SQuAD-shaped ReCoRD (several gold mentions): training takes the earliest one
    cast = qa.QAExample("r", "q", passage, ("Acme Corp", "Alice Smith"), (68, 16))
    assert qa.training_example(cast).answer_starts == (16,)
    assert qa.training_example(qa.QAExample("r", "q", passage, ("Nobody",), ())) is None


# --- TC -----------------------------------------------------------------------------------------


def test_tc_standard_labels_only_first_subtokens(tokenizer):
    words = ["Unaffable", "Zorblax", "visited", "Berlin"]
    tags = [1, 3, 0, 5]
    (feat,) = tc.encode([words], [tags], tokenizer, max_length=64, protocol="standard")
    labelled = [
        (tokenizer.convert_ids_to_tokens(t), tag) for t, tag in zip(feat["input_ids"], feat["labels"]) if tag != -100
    ]
    assert [tag for _, tag in labelled] == tags
    assert all(not tok.startswith("##") for tok, _ in labelled)
    assert len(feat["input_ids"]) > len(words) + 2, "some words split into several sub-tokens"
    assert feat["labels"][0] == -100 and feat["labels"][-1] == -100  # [CLS], [SEP]


def test_tc_paper_labels_every_subtoken_and_ends_with_eos(tokenizer):
    """The released TokenClassificationEval: sentence + EOS, no special tokens, every sub-token
    carries its word's tag (the test tokenizer has no EOS: its [SEP] stands in)."""
    words = ["Unaffable", "Zorblax", "visited", "Berlin"]
    tags = [1, 3, 0, 5]
    (feat,) = tc.encode([words], [tags], tokenizer, max_length=64, protocol="paper")
    tokens = tokenizer.convert_ids_to_tokens(feat["input_ids"])
    assert tokens[0] != "[CLS]" and tokens[-1] == "[SEP]" and tokens.count("[SEP]") == 1
    assert feat["labels"][-1] == -100  # EOS covers no word
    per_word = {}
    for word, label in zip(feat["word_of_token"], feat["labels"]):
        if word is not None:
            per_word.setdefault(word, set()).add(label)
    assert per_word == {i: {t} for i, t in enumerate(tags)}
    assert sum(label != -100 for label in feat["labels"]) == len(tokens) - 1 > len(words)


def test_majority_vote_breaks_ties_as_the_release():
    """`max(set(votes), key=votes.count)`: the tied label met first in the set's iteration."""
    assert tc.majority_vote([3, 3, 1]) == 3
    assert tc.majority_vote([2, 1]) == 1 and tc.majority_vote([1, 2]) == 1
    assert tc.majority_vote([1, 8]) == 8 == tc.majority_vote([8, 1])  # hash slot order, not value
    for votes in ([5, 0, 0, 5, 7], [4, 2, 2, 4], [30, 12, 30, 12]):
        assert tc.majority_vote(votes) == max(set(votes), key=votes.count)


@pytest.mark.parametrize("protocol", ["standard", "paper"])
def test_tc_truncated_words_get_no_prediction(tokenizer, tiny_dirs, protocol):
    from benchmarks.kinds.common import EvalContext

    model = tc.TokenClassifier(load_backbone(str(tiny_dirs["bert"])), 3).eval()
    sentences = [["word"] * 30, ["short", "one"]]
    preds = tc.predict(
        model, sentences, tokenizer, max_length=10, ctx=EvalContext(torch.device("cpu")), protocol=protocol
    )
    assert [len(p) for p in preds] == [30, 2]
    assert preds[0][20:] == [None] * 10 and None not in preds[1]
    assert all(p in (0, 1, 2) for p in preds[0][:8])


# --- QA, paper protocol ---------------------------------------------------------------------------


def test_qa_paper_input_and_answer_labels(tokenizer):
    context = "the cat sat on the mat near Berlin"
    example = qa.QAExample("q", "where?", context, ("the mat near", "mat"), (15, 19))
    (feat,) = qa.paper_features([example], tokenizer, max_length=64)
    text = tokenizer.decode(feat["input_ids"])
    assert text.startswith("question : where?") and "context : the cat" in text and text.endswith("[SEP]")
    assert "[CLS]" not in text and len(feat["labels"]) == len(feat["input_ids"])
    inside = [t for t, y in zip(feat["input_ids"], feat["labels"]) if y == 1]
    assert tokenizer.decode(inside) == "the mat near", "the first gold answer, every token of it"


def test_qa_paper_unanswerable_and_truncated_answers_label_nothing(tokenizer):
    long_context = " ".join(f"w{i}" for i in range(60))
    cut = qa.QAExample("c", "which?", long_context, ("w50",), (long_context.index("w50"),))
    none = qa.QAExample("n", "which?", "alpha beta", (), ())
    for feat in qa.paper_features([cut, none], tokenizer, max_length=24):
        assert set(feat["labels"]) == {0} and len(feat["input_ids"]) <= 24
    # an answer that the truncation cuts in two keeps its first part only (the release would label
    # one position past the window)
    straddle = qa.QAExample("s", "which?", long_context, ("w7 w8 w9",), (long_context.index("w7"),))
    (feat,) = qa.paper_features([straddle], tokenizer, max_length=22)  # 6 question tokens, w0-w7
    inside = [t for t, y in zip(feat["input_ids"], feat["labels"]) if y == 1]
    assert tokenizer.decode(inside) == "w7" and feat["labels"][-1] == 1


def test_qa_release_quirks_gold_past_the_window_and_argmax_over_padding(tokenizer):
    """`release_quirks` (paper's default, docs/protocol.md Choice 22): a cut answer's gold holds the
    position after the window, and the predicted positions come from batches of 4 padded to their
    longest input, padding included."""
    long_context = " ".join(f"w{i}" for i in range(60))
    straddle = qa.QAExample("s", "which?", long_context, ("w7 w8 w9",), (long_context.index("w7"),))
    (clean,) = qa.paper_features([straddle], tokenizer, max_length=22)
    (quirk,) = qa.paper_features([straddle], tokenizer, max_length=22, past_window=True)
    n = len(quirk["input_ids"])
    assert clean["answer"][-1] == n - 1 and quirk["answer"] == clean["answer"] + [n]  # one past the window
    assert quirk["labels"] == clean["labels"]  # nothing to train on past the input

    class AllInside(torch.nn.Module):
        """A head that labels every position 1 (inside the answer)."""

        def logits(self, batch):
            return torch.stack([torch.zeros(batch["input_ids"].shape), torch.ones(batch["input_ids"].shape)], -1)

    features = [{"input_ids": [5] * length, "labels": [0] * length} for length in (3, 5, 2, 4, 6)]
    ctx = EvalContext(torch.device("cpu"), batch_size=64)
    real = qa.predict_positions(AllInside(), features, 0, ctx)
    assert real == [list(range(length)) for length in (3, 5, 2, 4, 6)]
    padded = qa.predict_positions(AllInside(), features, 0, ctx, all_positions=True)
    assert padded == [list(range(5))] * 4 + [list(range(6))]  # batches of 4 (longest 5), then 1


# --- TC: whitespace-only sub-tokens (Llama-3 splits " 1996" into " ", "199", "6") ---------------

SENTENCES = [
    ["born", "in", "1996", "."],
    ["Acme", "Corp", "paid", "$", "2,500", "in", "2019", "to", "Alice"],
    ["In", "12345", "cities", ",", "7", "of", "9"],
]


@pytest.fixture(scope="module")
def llama3_tokenizer():
    return llama3_style_tokenizer([" ".join(words) for words in SENTENCES] * 5, vocab_size=300)


def _released_word_of_token(words, offsets):
    """The released TokenClassificationEval.tokenize walk, restated: a (0, 0) token has no word;
    otherwise move on to the next word while the token starts at or after the current word's end
    (words joined by one space); past the last word, none."""
    out, word, position = [], 0, 0
    for start, end in offsets:
        if (start, end) == (0, 0):
            out.append(None)
            continue
        while word < len(words) and start >= position + len(words[word]):
            position, word = position + len(words[word]) + 1, word + 1
        out.append(word if word < len(words) else None)
    return out


def test_tc_paper_aligns_every_token_as_the_release(llama3_tokenizer):
    texts = [" ".join(words) + llama3_tokenizer.eos_token for words in SENTENCES]
    enc = llama3_tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    differing = []
    for words, offsets, ids in zip(SENTENCES, enc["offset_mapping"], enc["input_ids"]):
        released = _released_word_of_token(words, offsets)
        assert tc.token_word_ids(words, offsets, "next_word") == released
        assert released[-1] is None  # the appended EOS
        ignored = tc.token_word_ids(words, offsets, "ignore")  # differs on the whitespace tokens only
        tokens = llama3_tokenizer.convert_ids_to_tokens(ids)
        differing += [(tokens[i], ignored[i]) for i in range(len(ids)) if ignored[i] != released[i]]
    assert differing == [("Ġ", None)] * 6  # before 1996, 2,500, 2019, 12345, 7 and 9


class _TokenStub(torch.nn.Module):
    """Predicts a fixed label per token id (the `table`), 0 for the others."""

    def __init__(self, table: dict[int, int], num_labels: int = 9):
        super().__init__()
        self.table, self.num_labels = table, num_labels

    def logits(self, batch):
        labels = batch["input_ids"].clone().apply_(lambda i: self.table.get(i, 0))
        return torch.nn.functional.one_hot(labels, self.num_labels).float()


def test_a_whitespace_token_gets_the_next_word_tag_and_its_vote_counts(llama3_tokenizer):
    tok = llama3_tokenizer
    words, tags = SENTENCES[0], [0, 0, 5, 0]
    (feat,) = tc.encode([words], [tags], tok, 64, protocol="paper")
    tokens = tok.convert_ids_to_tokens(feat["input_ids"])
    space = tokens.index("Ġ")
    assert tokens[space : space + 3] == ["Ġ", "199", "6"]
    assert feat["word_of_token"][space] == 2 and feat["labels"][space] == 5  # labelled with 1996's tag
    (ignored,) = tc.encode([words], [tags], tok, 64, protocol="paper", whitespace="ignore")
    assert ignored["word_of_token"][space] is None and ignored["labels"][space] == -100
    assert (
        feat["labels"][:space] + feat["labels"][space + 1 :]
        == ignored["labels"][:space] + ignored["labels"][space + 1 :]
    )
    # "Ġ" votes 2, "199" 1, "6" 2: 2 wins with the whitespace token's vote; without it, 1 and 2 tie
    # and the tie goes to 1 (as the release breaks ties, `majority_vote`)
    model = _TokenStub({tok.convert_tokens_to_ids(t): y for t, y in (("Ġ", 2), ("199", 1), ("6", 2))})
    ctx = EvalContext(torch.device("cpu"))
    assert tc.predict(model, [words], tok, 64, ctx, protocol="paper") == [[0, 0, 2, 0]]
    assert tc.predict(model, [words], tok, 64, ctx, protocol="paper", whitespace="ignore") == [[0, 0, 1, 0]]
    # `standard` (first sub-token with a character of the word): "199" predicts, "Ġ" is -100
    (first,) = tc.encode([words], [tags], tok, 64, protocol="standard")
    std_tokens = tok.convert_ids_to_tokens(first["input_ids"])
    assert first["labels"][std_tokens.index("Ġ")] == -100 and first["labels"][std_tokens.index("199")] == 5
    assert tc.predict(model, [words], tok, 64, ctx, protocol="standard") == [[0, 0, 1, 0]]


# --- IR: evaluation inputs as sentence-transformers' encode (the release) -----------------------

IR_TEXTS = ["Query: what is the capital of france", "  Query: how do vaccines work\n", "Document: " + "long " * 40]


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_ir_evaluation_encodes_as_sentence_transformers_encode(tiny_dirs, arch):
    """Same token ids as `SentenceTransformer(folder)` (the tokenizer's special tokens, no EOS,
    stripped text, the model maximum 16 not 99% of it), and its embeddings where it loads the
    model bidirectionally (BERT); a Llama, which it would run causally, runs bidirectionally."""
    from sentence_transformers import SentenceTransformer

    folder = str(tiny_dirs[arch])
    encoder = ir.BiEncoder(load_backbone(folder)).eval()
    settings = KindSettings(max_length=round(0.99 * 16), protocol="paper", ir_eval_max_length=16, ir_model_dir=folder)
    assert settings.ir_eval_encoding == "sentence_transformers"  # the paper protocol's choice
    fed = []  # the real tokens of every input the encoder ran on
    hook = encoder.backbone.register_forward_pre_hook(
        lambda module, args: fed.extend(tuple(row[mask.bool()].tolist()) for row, mask in zip(*args))
    )
    ctx = EvalContext(torch.device("cpu"), batch_size=2)
    embeddings = ir.evaluation_encoder(encoder, load_tokenizer(folder), settings, ctx)(IR_TEXTS)
    hook.remove()

    plain = SentenceTransformer(folder, device="cpu")
    plain.max_seq_length = 16
    stripped = [text.strip() for text in IR_TEXTS]
    features = plain[0].preprocess(stripped)
    expected = [
        tuple(row[mask.bool()].tolist()) for row, mask in zip(features["input_ids"], features["attention_mask"])
    ]
    assert sorted(fed) == sorted(expected)
    cls, sep = plain.tokenizer.cls_token_id, plain.tokenizer.sep_token_id
    assert all(ids[0] == cls and ids[-1] == sep for ids in expected) and max(map(len, expected)) == 16
    theirs = torch.nn.functional.normalize(plain.encode(stripped, convert_to_tensor=True), dim=-1)
    with torch.no_grad():
        ours = torch.nn.functional.normalize(encoder.embed(features), dim=-1)
    assert torch.allclose(embeddings, ours, atol=1e-6)
    assert torch.allclose(embeddings, theirs, atol=1e-5) == (arch == "bert")
    # the training inputs (text + EOS, no [CLS]) give other embeddings
    as_trained = KindSettings(max_length=round(0.99 * 16), protocol="paper", ir_eval_encoding="as_training")
    other = ir.evaluation_encoder(encoder, load_tokenizer(folder), as_trained, ctx)(IR_TEXTS)
    assert not torch.allclose(embeddings, other, atol=1e-3)
