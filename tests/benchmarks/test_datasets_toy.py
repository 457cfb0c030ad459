"""Loading and the split protocol on the committed toy mirror; the generator's guarantees."""

import dataclasses
import json
import math
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.datasets import TOY_DATA_ROOT, DatasetError, IRSplit, load_hub_split, load_task_data, make_toy
from benchmarks.datasets.schemas import HUB_SCHEMAS
from benchmarks.metrics import ndcg_at_10, rank_documents, seqeval_f1
from benchmarks.tasks import TASKS, HubSource


@pytest.fixture(scope="module")
def loaded():
    return {name: load_task_data(spec, TOY_DATA_ROOT, query_split_seed=0) for name, spec in TASKS.items()}


@pytest.mark.parametrize("key", sorted(HUB_SCHEMAS, key=str))
def test_toy_mirror_has_the_hub_schema(key):
    hub_id, config = key
    schema = HUB_SCHEMAS[key]
    folder = TOY_DATA_ROOT / hub_id / (config or "default")
    assert sorted(p.stem for p in folder.glob("*.jsonl")) == sorted(schema.splits)
    for split in schema.splits:
        ds = load_hub_split(HubSource(hub_id, config), split, TOY_DATA_ROOT)
        assert ds.features == schema.features, (key, split)
        assert len(ds) > 0
        first = json.loads((folder / f"{split}.jsonl").read_text().splitlines()[0])
        assert list(first) == list(schema.features), "column order of the Hub"


def test_glue_hidden_test_labels_and_class_labels():
    for config, splits in (("sst2", ["test"]), ("qqp", ["test"]), ("mnli", ["test_matched", "test_mismatched"])):
        for split in splits:
            ds = load_hub_split(HubSource("nyu-mll/glue", config), split, TOY_DATA_ROOT)
            assert set(ds["label"]) == {-1}
    spec = dataclasses.replace(TASKS["sst2"], splits={**TASKS["sst2"].splits, "test": "test"})
    with pytest.raises(DatasetError, match="hidden labels"):
        load_task_data(spec, TOY_DATA_ROOT, roles=("test",))


@pytest.mark.parametrize("name", ["sst2", "qqp", "mnli", "squad", "squad_v2", "record"])
def test_train_carveout_is_5_percent_seed_42_as_released(loaded, name):
    spec = TASKS[name]
    data = loaded[name]
    raw_train = load_hub_split(spec.source, "train", TOY_DATA_ROOT)
    raw_test = load_hub_split(spec.source, spec.splits["test"], TOY_DATA_ROOT)
    n = len(raw_train)
    assert len(data.train) == math.floor(0.95 * n) and len(data.train) + len(data.validation) == n
    assert len(data.test) == len(raw_test)
    # the released harness: train.train_test_split(train_size=0.95, seed=42)
    released = raw_train.train_test_split(train_size=0.95, seed=42)
    key = "idx" if spec.task_type == "SC" else "question"
    assert data.validation[key] == released["test"][key]
    assert data.train[key] == released["train"][key]
    assert data.split_record["seed"] == 42 and data.split_record["validation_fraction"] == 0.05
    again = load_task_data(spec, TOY_DATA_ROOT)
    assert again.split_record == data.split_record


def test_sc_columns_and_templates(loaded):
    for name in ("sst2", "qqp", "mnli"):
        data = loaded[name]
        assert data.train.column_names == ["text", "label", "idx"]
        assert data.label_names == TASKS[name].label_names
        assert data.train.features["label"].names == list(TASKS[name].label_names)
    assert loaded["mnli"].test[0]["text"].startswith("Premise: ")
    assert "\nHypothesis: " in loaded["mnli"].test[0]["text"]
    assert loaded["qqp"].test[0]["text"].startswith("Question 1: ")
    assert not loaded["sst2"].test[0]["text"].startswith("Sentence")


@pytest.mark.parametrize("name", ["conll2003", "ontonotes5", "uner"])
def test_tc_official_splits_and_labels(loaded, name):
    data = loaded[name]
    spec = TASKS[name]
    assert data.label_names == spec.label_names
    for role in ("train", "validation", "test"):
        ds = data.split(role)
        assert ds.column_names == ["tokens", "tags"]
        raw = load_hub_split(spec.source, role, TOY_DATA_ROOT)
        assert len(ds) == len(raw)
        for tokens, tags in zip(ds["tokens"], ds["tags"]):
            assert len(tokens) == len(tags) and all(0 <= t < spec.num_labels for t in tags)
    assert max(len(t) for t in data.test["tokens"]) > 128, "a long sentence for truncation"
    assert data.split_record["protocol"] == "official"


@pytest.mark.parametrize("name", ["squad", "squad_v2", "record"])
def test_qa_answers_are_exact_spans(loaded, name):
    data = loaded[name]
    for role in ("train", "validation", "test"):
        ds = data.split(role)
        assert ds.column_names == ["id", "context", "question", "answers"]
        assert len(set(ds["id"])) == len(ds)
        for context, answers in zip(ds["context"], ds["answers"]):
            for text, start in zip(answers["text"], answers["answer_start"]):
                assert context[start : start + len(text)] == text
    n_answers = Counter(len(a["text"]) for a in data.test["answers"])
    if name == "squad_v2":
        assert n_answers[0] > 0 and n_answers[3] > 0
    elif name == "squad":
        assert set(n_answers) == {3}
    else:
        assert all("@placeholder" in q for q in data.test["question"])
        assert all("@highlight" in c for c in data.test["context"])


def test_nq_query_halves_are_seeded_disjoint_and_recorded(loaded):
    """As the released nq(): half the sorted query ids, drawn with Python's random after seeding."""
    data = loaded["nq"]
    val, test = data.validation, data.test
    assert isinstance(val, IRSplit) and isinstance(test, IRSplit)
    qrels_raw = load_hub_split(HubSource("BeIR/nq-qrels"), "test", TOY_DATA_ROOT)
    all_q = set(qrels_raw["query-id"])
    assert set(val.qrels).isdisjoint(test.qrels) and set(val.qrels) | set(test.qrels) == all_q
    assert len(val.qrels) == round(len(all_q) / 2)
    assert data.split_record["query_split_seed"] == 0
    random.seed(0)  # transformers.set_seed(0), then the release's random.sample
    assert set(val.qrels) == set(random.sample(sorted(all_q), round(len(all_q) / 2)))
    again = load_task_data(TASKS["nq"], TOY_DATA_ROOT, roles=("validation", "test"), query_split_seed=0)
    assert again.validation.qrels == val.qrels and again.train is None
    other = load_task_data(TASKS["nq"], TOY_DATA_ROOT, roles=("validation",), query_split_seed=7)
    assert other.validation.qrels != val.qrels
    with pytest.raises(ValueError, match="give query_split_seed"):
        load_task_data(TASKS["nq"], TOY_DATA_ROOT, roles=("test",))
    # documents are "title. text" as the released loader builds them
    doc_id = next(iter(val.corpus))
    assert ". " in val.corpus[doc_id]


def test_ir_candidate_pools(loaded):
    data = loaded["msmarco"]  # default pool: one per dataset, as released
    test = data.test
    raw = {
        split: load_hub_split(HubSource("BeIR/msmarco-qrels"), split, TOY_DATA_ROOT) for split in ("validation", "test")
    }
    assert len(set(raw["test"]["query-id"])) == len(test.qrels) + 1, "the all-grade-0 query is not evaluated"
    named = {str(d) for split in raw.values() for d in split["corpus-id"]}
    assert set(test.corpus) == set(data.validation.corpus) == named, "every document of both qrels"
    assert any(g == 0 for docs in test.qrels.values() for g in docs.values())
    assert all(isinstance(q, str) for q in test.qrels), "ids cast to str"
    full = load_task_data(TASKS["msmarco"], TOY_DATA_ROOT, roles=("test",), pool="full_corpus")
    assert set(full.test.corpus) > set(test.corpus)
    own = load_task_data(TASKS["msmarco"], TOY_DATA_ROOT, roles=("validation", "test"), pool="qrels_pool")
    assert set(own.test.corpus) == {d for docs in own.test.qrels.values() for d in docs}
    assert set(own.test.corpus) | set(own.validation.corpus) < set(test.corpus)
    assert data.split_record["candidate_pool"] == "qrels_pool_all_splits"
    with pytest.raises(ValueError, match="candidate pool"):
        load_task_data(TASKS["msmarco"], TOY_DATA_ROOT, pool="bm25")
    assert data.train.column_names == ["query", "positive"]
    mldr = loaded["mldr_en"]
    assert max(len(t.split()) for t in mldr.test.corpus.values()) > 1000


def _copy_mirror(tmp_path: Path, rel: str) -> Path:
    shutil.copytree(TOY_DATA_ROOT / rel, tmp_path / rel)
    return tmp_path


def test_missing_column_names_dataset_split_and_column(tmp_path):
    root = _copy_mirror(tmp_path, "nyu-mll/glue/sst2")
    path = root / "nyu-mll/glue/sst2/validation.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "sentence"}) + "\n" for r in rows))
    with pytest.raises(DatasetError) as info:
        load_task_data(TASKS["sst2"], root)
    message = str(info.value)
    assert "nyu-mll/glue" in message and "'validation'" in message and "'sentence'" in message


def test_missing_split_file_is_a_clear_error(tmp_path):
    root = _copy_mirror(tmp_path, "hgissbkh/uner_en")
    (root / "hgissbkh/uner_en/default/test.jsonl").unlink()
    with pytest.raises(DatasetError, match=r"hgissbkh/uner_en.*'test'.*no file"):
        load_task_data(TASKS["uner"], root)


def test_mirror_may_omit_columns_the_task_does_not_read(tmp_path):
    root = _copy_mirror(tmp_path, "hgissbkh/uner_en")
    for path in (root / "hgissbkh/uner_en/default").glob("*.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({"tokens": r["tokens"], "ner_tags": r["ner_tags"]}) + "\n" for r in rows))
    data = load_task_data(TASKS["uner"], root)
    assert data.label_names == TASKS["uner"].label_names and len(data.test) == 64


def test_generator_is_deterministic_and_matches_the_committed_copy(tmp_path):
    make_toy.main([str(tmp_path / "toy")])
    committed = sorted(p.relative_to(TOY_DATA_ROOT) for p in TOY_DATA_ROOT.rglob("*.jsonl"))
    fresh = sorted(p.relative_to(tmp_path / "toy") for p in (tmp_path / "toy").rglob("*.jsonl"))
    assert fresh == committed
    assert make_toy.tree_digest(tmp_path / "toy") == make_toy.tree_digest(TOY_DATA_ROOT), (
        "regenerate the committed copy: python -m benchmarks.datasets.make_toy benchmarks/datasets/toy --clean"
    )
    assert sum((TOY_DATA_ROOT / p).stat().st_size for p in committed) < 3_000_000
    assert make_toy.build(seed=1) != make_toy.build(seed=0)


# --- learnability: simple non-neural baselines must beat chance clearly ------------------------


def _words(text):
    return text.lower().replace("?", " ").replace(".", " ").split()


def _naive_bayes(train_texts, train_labels, test_texts, n_labels):
    counts = [Counter() for _ in range(n_labels)]
    priors = Counter(train_labels)
    for text, label in zip(train_texts, train_labels):
        counts[label].update(_words(text))
    vocab = set().union(*counts)
    totals = [sum(c.values()) for c in counts]

    def predict(text):
        return max(
            range(n_labels),
            key=lambda k: (
                math.log(priors[k] + 1)
                + sum(math.log((counts[k][w] + 1) / (totals[k] + len(vocab))) for w in _words(text))
            ),
        )

    return [predict(t) for t in test_texts]


@pytest.mark.parametrize("name,minimum", [("sst2", 0.85), ("mnli", 0.65)])
def test_sc_toy_is_learnable_from_words(loaded, name, minimum):
    data = loaded[name]
    texts = [t.split("Hypothesis: ")[-1] for t in data.train["text"]]
    tests = [t.split("Hypothesis: ")[-1] for t in data.test["text"]]
    preds = _naive_bayes(texts, data.train["label"], tests, TASKS[name].num_labels)
    acc = sum(p == g for p, g in zip(preds, data.test["label"])) / len(preds)
    assert acc >= minimum


def test_qqp_toy_duplicates_follow_topic_overlap(loaded):
    data = loaded["qqp"]
    template = {
        "how",
        "do",
        "i",
        "what",
        "is",
        "the",
        "best",
        "way",
        "to",
        "can",
        "quickly",
        "should",
        "any",
        "tips",
        "does",
        "one",
        "well",
        "question",
        "1:",
        "2:",
        "a",
        "an",
        "for",
        "my",
    }
    hits = 0
    for text, label in zip(data.test["text"], data.test["label"]):
        q1, q2 = text.split("\n")
        shared = (set(_words(q1)) & set(_words(q2))) - template
        hits += int((len(shared) >= 2) == bool(label))
    assert hits / len(data.test) >= 0.85


def _gazetteer_f1(data, types: set[str] | None = None) -> float:
    """Tag each test word with its most frequent training tag ('O' if unseen); with `types`, F1
    over the entities of those types only (the others count as 'O')."""
    names = [n if types is None or n.split("-", 1)[-1] in types else "O" for n in data.label_names]
    memory = {}
    for tokens, tags in zip(data.train["tokens"], data.train["tags"]):
        for tok, tag in zip(tokens, tags):
            memory.setdefault(tok, Counter())[tag] += 1
    preds = [
        [names[memory[t].most_common(1)[0][0]] if t in memory else "O" for t in tokens]
        for tokens in data.test["tokens"]
    ]
    gold = [[names[t] for t in tags] for tags in data.test["tags"]]
    return seqeval_f1(preds, gold).score


def test_ner_toy_is_learnable_from_a_gazetteer(loaded):
    for name in ("conll2003", "uner", "ontonotes5"):
        assert _gazetteer_f1(loaded[name]) > 60, name


def test_ir_toy_is_learnable_from_lexical_overlap(loaded):
    for name in ("msmarco", "nq", "mldr_en"):
        split = loaded[name].test
        run = {}
        for qid, query in split.queries.items():
            q = set(_words(query)) - set(make_toy.FILLER) - {"what", "how", "does", "work", "definition"}
            run[qid] = dict(rank_documents({d: len(q & set(_words(text))) for d, text in split.corpus.items()}, 100))
        assert ndcg_at_10(run, split.qrels).score > 60, name


def test_raw_beir_files_tsv_qrels_and_gzipped_jsonl_load_the_same(tmp_path, loaded):
    import gzip

    for rel in ("BeIR/nq", "BeIR/nq-qrels"):
        shutil.copytree(TOY_DATA_ROOT / rel, tmp_path / rel)
    corpus = tmp_path / "BeIR/nq/corpus/corpus.jsonl"
    with gzip.open(corpus.with_suffix(".jsonl.gz"), "wt", encoding="utf-8") as handle:
        handle.write(corpus.read_text())
    corpus.unlink()
    qrels = tmp_path / "BeIR/nq-qrels/default/test.jsonl"
    rows = [json.loads(line) for line in qrels.read_text().splitlines()]
    qrels.with_suffix(".tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{r['query-id']}\t{r['corpus-id']}\t{r['score']}\n" for r in rows)
    )
    qrels.unlink()
    data = load_task_data(TASKS["nq"], tmp_path, roles=("validation", "test"), query_split_seed=0)
    assert data.test.qrels == loaded["nq"].test.qrels
    assert data.test.corpus == loaded["nq"].test.corpus


def test_tc_tags_as_plain_ints_or_strings_become_class_labels(tmp_path, loaded):
    from datasets import Dataset

    from benchmarks.datasets.loading import _ensure_class_labels

    spec = TASKS["conll2003"]
    names = spec.label_names
    ints = Dataset.from_dict({"words": [["Alice", "ran"]], "ner": [[1, 0]]})
    with pytest.warns(UserWarning, match="plain integer tags"):
        cast = _ensure_class_labels(spec, ints, "train")
    assert cast.features["ner"].feature.names == list(names) and cast[0]["ner"] == [1, 0]
    strings = Dataset.from_dict({"words": [["Alice", "ran"]], "ner": [["B-PER", "O"]]})
    assert _ensure_class_labels(spec, strings, "train")[0]["ner"] == [1, 0]
    bad = Dataset.from_dict({"words": [["x"]], "ner": [["B-FOO"]]})
    with pytest.raises(DatasetError, match="B-FOO"):
        _ensure_class_labels(spec, bad, "train")
    too_big = Dataset.from_dict({"words": [["x"]], "ner": [[9]]})
    with pytest.raises(DatasetError, match="tag id 9"):
        _ensure_class_labels(spec, too_big, "train")


SST2_AND_NER = ("sst2", "conll2003", "ontonotes5", "uner")
LEXICON_TYPES = {"PER", "PERSON", "ORG", "LOC", "GPE", "MISC", "NORP"}  # drawn from make_toy.Lexicon


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The toy world's tasks (`make_toy --world`), loaded as a run loads them."""
    root = tmp_path_factory.mktemp("world")
    make_toy.main([str(root), "--world"])
    return {name: load_task_data(spec, root, query_split_seed=0) for name, spec in TASKS.items()}


def _entity_words(data, split) -> set[str]:
    """Words tagged with a type whose names come from the lexicon (not dates, money, ...)."""
    types = [name.split("-", 1)[-1] for name in data.label_names]
    return {
        tok
        for tokens, tags in zip(split["tokens"], split["tags"])
        for tok, tag in zip(tokens, tags)
        if types[tag] in LEXICON_TYPES
    }


def _adjectives(sentence: str) -> set[str]:
    return set(sentence.split()) & set(make_toy.POS_ADJ + make_toy.NEG_ADJ)


def test_world_keeps_evaluation_names_out_of_the_training_split(world, loaded):
    """The names that decide an evaluation tag never occur in the training split (they do in the
    committed mirror), so only knowledge from elsewhere (the world corpus) can label them."""
    for name in SST2_AND_NER[1:]:
        data = world[name]
        train, test = _entity_words(data, data.train), _entity_words(data, data.test)
        assert train and test and not train & test, name
        assert _entity_words(loaded[name], loaded[name].train) & _entity_words(loaded[name], loaded[name].test), name


def test_world_sst2_evaluates_half_on_held_out_adjectives_with_balanced_labels(world, loaded):
    """Every other SST-2 evaluation sentence uses only adjectives the training split never uses
    (pretraining must place them), the others only training adjectives (fine-tuning alone can);
    both halves are balanced, so a majority guess scores 50."""
    seen, unseen = make_toy.FULL_LEXICON.seen(), make_toy.FULL_LEXICON.unseen()
    seen_words = set(seen.pos_adj) | set(seen.neg_adj)
    data = world["sst2"]
    assert set().union(*map(_adjectives, data.train["text"])) == seen_words
    test = list(zip(data.test["text"], data.test["label"]))
    held_out = test[0::2]
    assert all(_adjectives(text) and not _adjectives(text) & seen_words for text, _ in held_out)
    assert all(_adjectives(text) <= seen_words for text, _ in test[1::2])
    for half in (held_out, test[1::2]):
        assert Counter(label for _, label in half) == {0: len(half) // 2, 1: len(half) // 2}
    positive = set(unseen.pos_adj) | set(seen.pos_adj)
    for text, label in test:  # the main clause's adjective decides (the "although" clause the other)
        assert (
            text.split(" , ")[-1].split()[-2] in positive if "although" in text else _adjectives(text) <= positive
        ) == (label == 1), text
    assert _adjectives(" ".join(loaded["sst2"].train["text"])) & _adjectives(" ".join(loaded["sst2"].test["text"]))


def test_world_defeats_a_gazetteer_of_the_training_split(world, loaded):
    """The memorising baseline that tags the committed mirror well tags the held-out names badly:
    they need what pretraining taught."""
    for name in SST2_AND_NER[1:]:
        assert _gazetteer_f1(loaded[name], LEXICON_TYPES) > 60
        assert _gazetteer_f1(world[name], LEXICON_TYPES) < 5, name


def test_world_training_splits_are_sized_for_one_epoch_budgets(world):
    rows = make_toy.WORLD_TRAIN_ROWS
    raw = make_toy.build(world=True)
    for path, kind in (
        ("nyu-mll/glue/sst2/train.jsonl", "sc"),
        ("nyu-mll/glue/qqp/train.jsonl", "qqp"),
        ("hgissbkh/conll2003-en/default/train.jsonl", "tc"),
        ("rajpurkar/squad/plain_text/train.jsonl", "qa"),
        ("rajpurkar/squad_v2/squad_v2/train.jsonl", "qa"),
        ("hgissbkh/record/default/train.jsonl", "record"),
        ("hgissbkh/msmarco-pairs/default/train.jsonl", "ir_pairs"),
    ):
        assert len(raw[path]) == rows[kind], path
    # evaluation splits sized so that one untrained model is a fair per-task reference
    evaluated = make_toy.WORLD_EVAL_ROWS
    assert len(world["msmarco"].test.queries) == evaluated["msmarco"] - 1  # one judged only non-relevant
    for name in ("sst2", "qqp", "mnli"):
        assert len(world[name].test["label"]) == evaluated["sc"], name
    assert len(raw["BeIR/nq/queries/queries.jsonl"]) == evaluated["nq"]
    assert len(raw["hgissbkh/mldr-en/default/test.jsonl"]) == evaluated["mldr"]


def test_world_qqp_pairs_another_question_on_the_same_topic_as_non_duplicates(world):
    other = [t.split("{v}")[0].strip() for t in make_toy.QQP_OTHER]  # "why do people", "where can i", ...
    data = world["qqp"]
    rows = list(zip(data.train["text"], data.train["label"]))

    def topic(question: str) -> str:
        (found,) = {o for _, o in make_toy.QQP_TOPICS if f" {o} " in f" {question.lower()} "}
        return found

    same_topic_non_duplicates = 0
    for text, label in rows:
        q1, q2 = (line.split(": ", 1)[1] for line in text.split("\n"))
        asks_other = [any(q.lower().startswith(o) for o in other) for q in (q1, q2)]
        if label == 1:
            assert topic(q1) == topic(q2) and not any(asks_other), text
        elif any(asks_other):
            assert topic(q1) == topic(q2) and asks_other.count(True) == 1, text
            same_topic_non_duplicates += 1
        else:
            assert topic(q1) != topic(q2), text
    assert 0.3 < same_topic_non_duplicates / sum(1 - label for _, label in rows) < 0.7
    labels = list(data.test["label"])
    assert Counter(labels)[0] == Counter(labels)[1]


def test_world_qa_biographies_are_infoboxes(world):
    """Born, studied, founded, always in that order, no other person; questions on four facts."""
    data = world["squad"]
    asked = {make_toy.QUESTIONS[k].split("{n}")[0] for k in make_toy.WORLD_QUESTIONS}
    for row in data.train:
        context = row["context"]
        assert context.index(" was born in ") < context.index(" studied ") < context.index(" founded ")
        assert context.count(" was born in ") == 1
        assert any(row["question"].startswith(prefix) for prefix in asked), row["question"]
        text, start = row["answers"]["text"][0], row["answers"]["answer_start"][0]
        assert context[start : start + len(text)] == text
    v2 = world["squad_v2"].train
    unanswerable = sum(not row["answers"]["text"] for row in v2)
    assert 0.15 < unanswerable / len(v2) < 0.35


def test_world_corpus_gives_every_word_a_context_of_its_class():
    rows = make_toy.world_corpus(3000)
    assert rows == make_toy.world_corpus(3000) and rows != make_toy.world_corpus(3000, seed=1)
    text = " ".join(row["text"] for row in rows)
    lex = make_toy.FULL_LEXICON
    for words in dataclasses.astuple(lex):
        missing = [w for w in words if f" {w} " not in f" {text} "]
        assert not missing, missing
    positive, negative = set(lex.pos_adj), set(lex.neg_adj)
    sentences = [s for row in rows for s in row["text"].split(" . ") if set(s.split()) & (positive | negative)]
    assert len(sentences) > 100
    for sentence in sentences:
        words = set(sentence.split())
        assert not (words & positive and words & negative), sentence
        opposite = {"hated", "disliked"} if words & positive else {"loved", "liked"}
        assert not words & opposite, sentence


def test_world_corpus_pages_stay_on_one_topic():
    """A document is a page on one subject, several sentences long (docs/reproduce.md, "Toy
    learning"): a review keeps one polarity, a news story comes back to its people, a glossary page
    names one concept's terms; every task's domain is there."""
    rows = make_toy.world_corpus(3000)
    text = " ".join(row["text"] for row in rows)
    for marker in ("was born in", "founded", "chief executive", "How do i", "Why do people", "in the village"):
        assert marker in text, marker
    words = [len(row["text"].split()) for row in rows]
    assert 30 < sum(words) / len(words) < 60 and min(words) >= 8  # pages, not sentences
    positive, negative = set(make_toy.POS_ADJ), set(make_toy.NEG_ADJ)
    reviews = [set(row["text"].split()) for row in rows if set(row["text"].split()) & (positive | negative)]
    assert len(reviews) > 400 and not any(r & positive and r & negative for r in reviews)
    people = set(make_toy.FIRST) | set(make_toy.LAST)
    stories = [row["text"].split() for row in rows if " said " in row["text"] or "Shares of" in row["text"]]
    returning = [s for s in stories if max(Counter(w for w in s if w in people).values(), default=0) >= 2]
    assert len(returning) > 0.6 * len(stories)
    concepts = make_toy.Concepts.of(make_toy.ir_vocabulary())
    term = {word: i for i, group in enumerate(concepts.groups) for word in group}
    glossary = [[term[w] for w in row["text"].rstrip(".").split() if w in term] for row in rows]
    glossary = [g for g in glossary if len(g) >= 5]
    assert len(glossary) > 300
    assert all(len(set(g)) == 1 for g in glossary)  # one concept's terms only, all four of them
    for row in rows:
        named = {w for w in row["text"].rstrip(".").split() if w in term}
        if len(named) >= 4 and len({term[w] for w in named}) == 1:
            assert named == set(concepts.groups[term[next(iter(named))]])


def test_world_ir_evaluates_concepts_the_fine_tuning_pairs_never_use():
    """The IR pseudo-words form concepts of four terms; MS MARCO training pairs use half of them,
    every evaluation query and judged document the other half, and a query can use a term its
    relevant document lacks (only the world corpus says which terms belong together)."""
    concepts = make_toy.Concepts.of(make_toy.ir_vocabulary())
    seen = {w for g in concepts.half(False).groups for w in g}
    unseen = {w for g in concepts.half(True).groups for w in g}
    assert not seen & unseen and len(seen) == len(unseen) == 200
    raw = make_toy.build(world=True)
    pairs = raw["hgissbkh/msmarco-pairs/default/train.jsonl"]
    used = {w for row in pairs for w in (row["query"] + " " + row["positive"]).rstrip(".").split()}
    assert used & seen and not used & unseen
    queries = {row["_id"]: row["text"] for row in raw["BeIR/msmarco/queries/queries.jsonl"]}
    corpus = {row["_id"]: row["text"] for row in raw["BeIR/msmarco/corpus/corpus.jsonl"]}
    missing_term = 0
    for qrel in raw["BeIR/msmarco-qrels/default/test.jsonl"]:
        query = set(queries[str(qrel["query-id"])].split()) & (seen | unseen)
        assert query <= unseen
        if qrel["score"] == 3:
            missing_term += bool(query - set(corpus[str(qrel["corpus-id"])].rstrip(".").split()))
    assert missing_term > 5


def test_world_corpus_cli_writes_rows_prepare_data_reads(tmp_path):
    assert make_toy.main([str(tmp_path), "--world-corpus", "20"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "world.jsonl").read_text().splitlines()]
    assert [row["id"] for row in rows] == [f"toy-world-0-{i}" for i in range(20)]
    assert rows == make_toy.world_corpus(20)
