"""Write toy versions of all 12 task datasets in their exact Hub schemas: `python -m
benchmarks.datasets.make_toy OUT_DIR`.

Why: the real datasets cannot be downloaded offline (CI, the embedded default) and their
licences forbid committing real rows (docs/benchmarks.md, "Toy data"). The toy data are a local
mirror (`<OUT_DIR>/<hub_id>/<config or "default">/<split>.jsonl`) that the normal loader reads
with the Hub features (benchmarks/datasets/schemas.py), so tests exercise the real code path.
A copy is committed at benchmarks/datasets/toy/ (`benchmarks.datasets.TOY_DATA_ROOT`).

Properties:
- Same columns, types, label names/order, nested shapes and split names as the Hub, including
  hidden-label test splits (GLUE `label == -1`).
- Synthetic text only: invented names, a small English word list and generated pseudo-words.
- Deterministic: every dataset draws from `random.Random("<seed>:<hub_id>/<config>")`; the output
  is byte-identical for the same seed (a test regenerates and compares with the committed copy).
- Small (a few hundred training rows, 40-80 evaluation rows, < 3 MB in all) and LEARNABLE: the
  label of every example follows from surface cues a small model picks up after a short
  fine-tune, so a working pipeline scores clearly above chance and a broken one does not:
  * SST-2: sentiment = polarity of the adjectives (a fifth of the rows contrast an opposite
    adjective in an "although" clause; the main clause decides).
  * QQP: duplicate = both questions are about the same topic (subject and object words), worded
    with different templates; non-duplicates share the template style but not the topic.
  * MNLI: premise "<Name> <verb> the <object> in <place> ."; entailment hypotheses restate a
    part of it, neutral ones add a reason or purpose not in the premise, contradictions negate
    it ("did not", "never", "nobody").
  * CoNLL-2003 / OntoNotes / UNER: templated news sentences whose entities come from capitalised
    gazetteers (multi-token names, adjacent entities), with capitalised non-entities (weekdays,
    sentence-initial words) as distractors; one very long sentence per evaluation split
    exercises truncation.
  * SQuAD / SQuAD-v2: short biographies (shuffled sentence order, plus a distractor sentence
    about another person); questions ask for the birthplace, birth year, subject, university,
    company or product; answers are exact spans with character offsets. SQuAD-v2 adds
    unanswerable questions: three quarters ask for a fact the biographies never give (a dog, a
    spouse, a height), one quarter ask about a person absent from the context. Validation rows carry three
    gold answers (duplicates and a longer variant), as in SQuAD.
  * ReCoRD (SQuAD-style mirror): a news passage with "@highlight" lines; the question replaces
    one entity by "@placeholder"; gold answers are all mentions of that entity.
  * IR (MS MARCO pairs, MS MARCO, NQ, MLDR): each document is built around a few topic
    pseudo-words mixed with filler; its query uses 2-3 of them, so relevance is lexical overlap
    that a contrastively trained mean-pooled encoder learns from the pairs. Distractor documents
    share at most one topic word. MS MARCO test qrels are graded 0-3 (as TREC DL 2019) and
    contain a query with only grade-0 judgements; NQ documents have titles; MLDR documents are
    long (one is over 1,000 words).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.tasks import CONLL2003_TAGS, ONTONOTES5_TAGS, UNER_TAGS
from contracts.provenance import atomic_write_text

DEFAULT_SEED = 0

# ----------------------------------------------------------------------------- vocabulary

FIRST = [
    "Alice",
    "Bruno",
    "Carla",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
    "Keiko",
    "Liam",
    "Mara",
    "Nils",
    "Olga",
    "Pavel",
    "Rosa",
    "Samir",
    "Tara",
    "Victor",
    "Wanda",
    "Yusuf",
    "Zoe",
    "Amara",
    "Bao",
    "Chiara",
    "Dario",
    "Esther",
    "Felix",
    "Hana",
]
LAST = [
    "Smith",
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Tanaka",
    "Novak",
    "Rossi",
    "Schmidt",
    "Kowalski",
    "Haddad",
    "Fischer",
    "Alvarez",
    "Berg",
    "Costa",
    "Dubois",
    "Mensah",
    "Ivanova",
    "Quint",
    "Sato",
    "Varga",
]
ORGS = [
    "Norvik Systems",
    "Talbrook Bank",
    "Quillon Labs",
    "Brenfield Motors",
    "Ostrava Foods",
    "Kelmar Group",
    "Vantor Airlines",
    "Drezna Steel",
    "Holmgard Media",
    "Pellucid Energy",
    "Arbel Insurance",
    "Corvane Logistics",
    "Miravel Pharma",
    "Sundel Telecom",
]
CITIES = [
    "Berlin",
    "Lagos",
    "Lima",
    "Oslo",
    "Kyoto",
    "Porto",
    "Nairobi",
    "New York",
    "San Diego",
    "Buenos Aires",
    "Cape Town",
    "Quebec",
    "Hanoi",
    "Tunis",
    "Gdansk",
    "Bergen",
]
MISC = [
    "German",
    "Nigerian",
    "Peruvian",
    "Japanese",
    "Olympic Games",
    "World Cup",
    "Davis Cup",
    "Norwegian",
    "Brazilian",
    "Tour de France",
]
NORP = ["German", "Nigerian", "Peruvian", "Japanese", "Norwegian", "Brazilian", "Kenyan"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
MONTHS = ["January", "March", "April", "June", "August", "October", "December"]
NUMBERS = ["two", "three", "four", "five", "six", "seven", "twelve"]
ORDINALS = ["first", "second", "third", "fourth"]
SUBJECTS = [
    "chemistry",
    "history",
    "economics",
    "music",
    "geology",
    "law",
    "medicine",
    "architecture",
    "physics",
    "linguistics",
]
UNIVERSITIES = [
    "Elmstead University",
    "Ravenmoor College",
    "the Harlan Institute",
    "Westbrook University",
    "Caldera College",
]
PRODUCTS = [
    "electric bicycles",
    "water filters",
    "solar lamps",
    "garden robots",
    "wool coats",
    "paper boats",
    "smart kettles",
    "glass bottles",
    "drone parts",
    "board games",
]

POS_ADJ = [
    "wonderful",
    "moving",
    "brilliant",
    "charming",
    "funny",
    "delightful",
    "gripping",
    "beautiful",
    "clever",
    "warm",
    "touching",
    "superb",
]
NEG_ADJ = [
    "dull",
    "tedious",
    "clumsy",
    "boring",
    "awful",
    "bland",
    "messy",
    "lifeless",
    "predictable",
    "shallow",
    "tiresome",
    "dreadful",
]
FILM_NOUNS = [
    "film",
    "movie",
    "story",
    "script",
    "cast",
    "performance",
    "plot",
    "soundtrack",
    "ending",
    "dialogue",
    "direction",
    "camera work",
]

QQP_TOPICS = [
    ("learn", "python"),
    ("cook", "rice"),
    ("visit", "japan"),
    ("fix", "a bike"),
    ("train", "a puppy"),
    ("grow", "tomatoes"),
    ("paint", "a wall"),
    ("learn", "guitar"),
    ("save", "money"),
    ("lose", "weight"),
    ("start", "a business"),
    ("write", "a novel"),
    ("clean", "an oven"),
    ("build", "a website"),
    ("study", "physics"),
    ("improve", "my english"),
    ("buy", "a used car"),
    ("bake", "bread"),
    ("prepare", "for an interview"),
    ("sleep", "better"),
]
QQP_A = ["how do i {v} {o} ?", "what is the best way to {v} {o} ?", "how can i {v} {o} quickly ?"]
QQP_B = ["what should i do to {v} {o} ?", "any tips to {v} {o} ?", "how does one {v} {o} well ?"]

VERBS = [
    ("painted", "paint"),
    ("repaired", "repair"),
    ("sold", "sell"),
    ("bought", "buy"),
    ("cleaned", "clean"),
    ("moved", "move"),
    ("opened", "open"),
    ("carried", "carry"),
]
OBJECTS = ["fence", "piano", "boat", "bicycle", "kitchen", "old car", "window", "gate"]
PLACES_M = ["the village", "the city centre", "the harbour", "the old town", "the market"]
PLACES_MM = ["the airport", "the stadium", "the hospital", "the library", "the factory"]
REASONS = [
    "because it was raining",
    "to please a friend",
    "for the summer festival",
    "because the owner asked",
    "to earn some money",
]

FILLER = [
    "the",
    "of",
    "and",
    "a",
    "in",
    "for",
    "with",
    "about",
    "is",
    "are",
    "this",
    "that",
    "report",
    "notes",
    "guide",
    "overview",
    "method",
    "history",
    "use",
    "common",
    "new",
    "local",
    "study",
    "data",
    "system",
    "process",
    "between",
    "also",
    "often",
    "many",
]
SYLLABLES = [
    "ka",
    "ro",
    "vi",
    "len",
    "tor",
    "mi",
    "sa",
    "dun",
    "pe",
    "lo",
    "zar",
    "qui",
    "ben",
    "ta",
    "mo",
    "rel",
    "fi",
    "gan",
    "shu",
    "ve",
    "nor",
    "pla",
    "dri",
    "co",
]


@dataclass(frozen=True)
class Lexicon:
    """The word lists the SST-2 and NER generators draw from. `FULL_LEXICON` writes the committed
    toy data; `--held-out-words` writes training rows from `seen()` and evaluation rows from
    `unseen()` (docs/reproduce.md, "Toy learning")."""

    pos_adj: tuple[str, ...]
    neg_adj: tuple[str, ...]
    first: tuple[str, ...]
    last: tuple[str, ...]
    orgs: tuple[str, ...]
    cities: tuple[str, ...]
    misc: tuple[str, ...]
    norp: tuple[str, ...]

    def _half(self, second: bool) -> Lexicon:
        halves = {name: (words[: len(words) // 2], words[len(words) // 2 :]) for name, words in vars(self).items()}
        return Lexicon(**{name: pair[second] for name, pair in halves.items()})

    def seen(self) -> Lexicon:
        """The first half of every list: the words a held-out-words training split uses."""
        return self._half(second=False)

    def unseen(self) -> Lexicon:
        """The second half: the words only the evaluation splits (and the world corpus) use."""
        return self._half(second=True)


FULL_LEXICON = Lexicon(*(tuple(words) for words in (POS_ADJ, NEG_ADJ, FIRST, LAST, ORGS, CITIES, MISC, NORP)))


def pseudo_words(rng: random.Random, n: int) -> list[str]:
    words: list[str] = []
    seen = set(FILLER)
    while len(words) < n:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 3))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def stable_id(*parts, length: int = 24) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:length]


# ----------------------------------------------------------------------------- SC


def sst2_rows(
    rng: random.Random, n: int, hidden: bool, lexicons: tuple[Lexicon, ...] = (FULL_LEXICON,), balanced: bool = False
) -> list[dict]:
    """Row i takes its adjectives from `lexicons[i % len(lexicons)]`; `balanced`: labels 0, 1, 1, 0,
    0, 1, 1, 0, ... (half of each lexicon's rows positive) instead of drawn."""
    rows = []
    for i in range(n):
        lex = lexicons[i % len(lexicons)]
        label = (i + i // 2) % 2 if balanced else rng.randrange(2)
        adjs, opp = (lex.pos_adj, lex.neg_adj) if label else (lex.neg_adj, lex.pos_adj)
        noun, noun2 = rng.sample(FILM_NOUNS, 2)
        kind = rng.random()
        if kind < 0.2:
            text = f"although the {noun} is {rng.choice(opp)} , the {noun2} is {rng.choice(adjs)} ."
        elif kind < 0.6:
            a, b = rng.sample(adjs, 2)
            text = f"a {a} and {b} {noun} ."
        else:
            text = f"the {noun} is {rng.choice(['really ', 'quite ', ''])}{rng.choice(adjs)} ."
        rows.append({"sentence": text + rng.choice(["", " "]), "label": -1 if hidden else label, "idx": i})
    return rows


# Questions about a topic that ask something else than how to do it: a toy-world QQP
# non-duplicate of a how-to question on the same topic (real QQP is full of such pairs).
QQP_OTHER = [
    "why do people {v} {o} ?",
    "where can i {v} {o} ?",
    "when should i {v} {o} ?",
    "who can teach me to {v} {o} ?",
]


def qqp_rows(rng: random.Random, n: int, hidden: bool, other_intent: float = 0.0, balanced: bool = False) -> list[dict]:
    """`other_intent`: the share of non-duplicates that ask another question (QQP_OTHER) about the
    same topic instead of the same question about another topic. `balanced`: labels alternate 0/1
    (a majority-class guess then scores 50) instead of 45% duplicates."""
    rows = []
    for i in range(n):
        v, o = rng.choice(QQP_TOPICS)
        label = i % 2 if balanced else int(rng.random() < 0.45)
        if label:
            v2, o2 = v, o
        elif other_intent and rng.random() < other_intent:
            v2, o2 = None, o
        else:
            v2, o2 = rng.choice([t for t in QQP_TOPICS if t[1] != o])
        q1 = rng.choice(QQP_A).format(v=v, o=o)
        q2 = rng.choice(QQP_OTHER).format(v=v, o=o) if v2 is None else rng.choice(QQP_B).format(v=v2, o=o2)
        q1, q2 = (q1, q2) if rng.random() < 0.5 else (q2, q1)
        rows.append(
            {"question1": q1.capitalize(), "question2": q2.capitalize(), "label": -1 if hidden else label, "idx": i}
        )
    return rows


def mnli_rows(rng: random.Random, n: int, hidden: bool, places: list[str]) -> list[dict]:
    rows = []
    for i in range(n):
        name = rng.choice(FIRST)
        past, base = rng.choice(VERBS)
        obj = rng.choice(OBJECTS)
        place = rng.choice(places)
        premise = f"{name} {past} the {obj} in {place} ."
        label = rng.randrange(3)
        other = rng.choice([o for o in OBJECTS if o != obj])
        if label == 0:
            hyp = rng.choice(
                [
                    f"{name} {past} something .",
                    f"Someone {past} the {obj} .",
                    f"{name} was in {place} .",
                    f"{name} {past} the {obj} .",
                    f"{name} {past} the {obj} .",
                ]
            )
        elif label == 1:
            hyp = rng.choice(
                [
                    f"{name} {past} the {obj} {rng.choice(REASONS)} .",
                    f"{name} {past} the {obj} with a neighbour .",
                    f"{name} enjoyed working on the {obj} .",
                ]
            )
        else:
            hyp = rng.choice(
                [
                    f"{name} did not {base} the {obj} .",
                    f"{name} never went to {place} .",
                    f"Nobody {past} the {obj} .",
                    f"{name} {past} the {other} .",
                    f"{name} {past} the {other} .",
                ]
            )
        rows.append({"premise": premise, "hypothesis": hyp, "label": -1 if hidden else label, "idx": i})
    return rows


# ----------------------------------------------------------------------------- TC

# A sentence template: a list of plain tokens and entity slots ("<TYPE>").
CONLL_TEMPLATES = [
    "<PER> , the chief executive of <ORG> , arrived in <LOC> on <DAY> .",
    "<ORG> said on <DAY> it will open a new office in <LOC> .",
    "<MISC> fans cheered as <PER> scored twice .",
    "<PER> met <PER> in <LOC> to discuss the merger .",
    "Shares of <ORG> rose 3 percent in <LOC> .",
    "The <MISC> delegation left <LOC> after talks with <ORG> .",
    "Police in <LOC> said <PER> was not injured .",
    "The market closed higher on <DAY> as investors returned .",
    "<PER> won the <MISC> title for <LOC> .",
]
ONTO_TEMPLATES = [
    "<PERSON> joined <ORG> in <DATE> .",
    "<ORG> paid <MONEY> for <CARDINAL> factories in <GPE> .",
    "The <NORP> delegation arrived in <GPE> on <DATE> .",
    "<PERSON> finished <ORDINAL> with <PERCENT> of the vote .",
    "The meeting in <GPE> started at <TIME> .",
    "<ORG> hired <CARDINAL> engineers last week , <PERSON> said .",
    "Prices rose sharply in <DATE> , the ministry said .",
]
UNER_TEMPLATES = [
    "I met <PER> at the <ORG> office in <LOC> yesterday .",
    "Does anyone know a good restaurant in <LOC> ?",
    "<PER> works for <ORG> and lives in <LOC> .",
    "We flew from <LOC> to <LOC> with <ORG> .",
    "Thanks <PER> , the package arrived on time .",
    "The service at <ORG> was terrible .",
]


def _person(rng, lex: Lexicon, full_prob=0.7) -> list[str]:
    if rng.random() < full_prob:
        return [rng.choice(lex.first), rng.choice(lex.last)]
    return [rng.choice(lex.last)]


def _conll_entity(rng, kind, lex: Lexicon):
    if kind == "PER":
        return "PER", _person(rng, lex)
    if kind == "ORG":
        return "ORG", rng.choice(lex.orgs).split()
    if kind == "LOC":
        return "LOC", rng.choice(lex.cities).split()
    if kind == "MISC":
        return "MISC", rng.choice(lex.misc).split()
    if kind == "DAY":
        return None, [rng.choice(WEEKDAYS)]
    raise KeyError(kind)


def _onto_entity(rng, kind, lex: Lexicon):
    if kind == "PERSON":
        return kind, _person(rng, lex)
    if kind == "ORG":
        return kind, rng.choice(lex.orgs).split()
    if kind == "GPE":
        return kind, rng.choice(lex.cities).split()
    if kind == "NORP":
        return kind, [rng.choice(lex.norp)]
    if kind == "DATE":
        return kind, rng.choice(
            [[rng.choice(MONTHS), str(rng.randrange(1990, 2024))], [rng.choice(WEEKDAYS)], ["last", "year"]]
        )
    if kind == "MONEY":
        return kind, ["$", str(rng.randrange(2, 90)), "million"]
    if kind == "CARDINAL":
        return kind, [rng.choice(NUMBERS)]
    if kind == "ORDINAL":
        return kind, [rng.choice(ORDINALS)]
    if kind == "PERCENT":
        return kind, [str(rng.randrange(2, 60)), "percent"]
    if kind == "TIME":
        return kind, [str(rng.randrange(1, 12)), rng.choice(["a.m.", "p.m."])]
    raise KeyError(kind)


def _fill(rng, template: str, entity_fn, lex: Lexicon) -> tuple[list[str], list[str]]:
    tokens, tags = [], []
    for piece in template.split():
        if piece.startswith("<") and piece.endswith(">"):
            kind, words = entity_fn(rng, piece[1:-1], lex)
            tokens += words
            tags += ["O"] * len(words) if kind is None else [f"B-{kind}"] + [f"I-{kind}"] * (len(words) - 1)
        else:
            tokens.append(piece)
            tags.append("O")
    return tokens, tags


def _long_sentence(rng, templates, entity_fn, lex: Lexicon, min_tokens: int = 160):
    tokens, tags = [], []
    while len(tokens) < min_tokens:
        t, g = _fill(rng, rng.choice(templates), entity_fn, lex)
        tokens += t[:-1] + [";"]
        tags += g[:-1] + ["O"]
    tokens[-1] = "."
    return tokens, tags


def tc_sentences(rng, n, templates, entity_fn, long_one: bool, lex: Lexicon):
    out = [_fill(rng, rng.choice(templates), entity_fn, lex) for _ in range(n)]
    if long_one:
        out[-1] = _long_sentence(rng, templates, entity_fn, lex)
    return out


def conll_rows(rng, n, long_one, lex: Lexicon = FULL_LEXICON):
    index = {t: i for i, t in enumerate(CONLL2003_TAGS)}
    return [
        {"id": str(i), "words": toks, "ner": [index[t] for t in tags]}
        for i, (toks, tags) in enumerate(tc_sentences(rng, n, CONLL_TEMPLATES, _conll_entity, long_one, lex))
    ]


def ontonotes_rows(rng, n, long_one, lex: Lexicon = FULL_LEXICON):
    index = {t: i for i, t in enumerate(ONTONOTES5_TAGS)}
    return [
        {"tokens": toks, "tags": [index[t] for t in tags]}
        for toks, tags in tc_sentences(rng, n, ONTO_TEMPLATES, _onto_entity, long_one, lex)
    ]


def uner_rows(rng, n, split, long_one, lex: Lexicon = FULL_LEXICON):
    index = {t: i for i, t in enumerate(UNER_TAGS)}
    rows = []
    for i, (toks, tags) in enumerate(tc_sentences(rng, n, UNER_TEMPLATES, _conll_entity, long_one, lex)):
        rows.append(
            {
                "idx": f"syn-en_ewt-{split}-{i:04d}",
                "text": " ".join(toks),
                "tokens": toks,
                "ner_tags": [index[t] for t in tags],
                "annotator": ["-" if t == "O" else "a1" for t in tags],
            }
        )
    return rows


# ----------------------------------------------------------------------------- QA


def _biography(rng, infobox: bool = False):
    """A shuffled short biography; returns (context, facts) with facts[key] = (answer, start).
    `infobox` (toy world): the three facts always in the same order and no distractor sentence
    about another person, as in an infobox; a small model then learns to extract in ~80 steps."""
    name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    other = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    while other.split()[1] == name.split()[1]:
        other = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    city, city2 = rng.sample(CITIES, 2)
    year, year2 = rng.randrange(1930, 1990), rng.randrange(1990, 2020)
    subject, uni, org, product = (
        rng.choice(SUBJECTS),
        rng.choice(UNIVERSITIES),
        rng.choice(ORGS),
        rng.choice(PRODUCTS),
    )
    sentences = [
        [name, " was born in ", ("city", city), " in ", ("year", str(year)), "."],
        [name.split()[0], " studied ", ("subject", subject), " at ", ("university", uni), "."],
        [f"In {year2}, {name.split()[0]} founded ", ("org", org), ", a company that makes ", ("product", product), "."],
        [f"{other} was born in {city2} and later moved to {rng.choice(CITIES)}."],
    ]
    if infobox:
        sentences = sentences[:3]
    else:
        rng.shuffle(sentences)
    context, spans = "", {}
    for sentence in sentences:
        if context:
            context += " "
        for piece in sentence:
            if isinstance(piece, tuple):
                spans[piece[0]] = (piece[1], len(context))
                context += piece[1]
            else:
                context += piece
    assert all(context[s : s + len(a)] == a for a, s in spans.values())
    return name, other, context, spans


QUESTIONS = {
    "city": "Where was {n} born?",
    "year": "In which year was {n} born?",
    "subject": "What did {n} study?",
    "university": "Where did {n} study?",
    "org": "Which company did {n} found?",
    "product": "What does the company founded by {n} make?",
}


UNANSWERABLE = [
    "What is the name of {n}'s dog?",
    "Who did {n} marry?",
    "How tall is {n}?",
    "Which team does {n} support?",
    "What is {n}'s favourite colour?",
]


# The facts the toy world asks about: one answer of each kind per biography (the subject and the
# university are both "where/what ... study", which a small model confuses for long).
WORLD_QUESTIONS = ("city", "org", "product", "year")


def squad_rows(rng, n, split, multi_answers: bool, unanswerable: float, infobox: bool = False, asked=QUESTIONS):
    """`asked`: the fact kinds questions are drawn from (3 per biography); `infobox`: `_biography`'s."""
    rows = []
    while len(rows) < n:
        name, other, context, spans = _biography(rng, infobox)
        title = "Syn_" + name.replace(" ", "_")
        for key in rng.sample(sorted(asked), 3):
            if len(rows) >= n:
                break
            if rng.random() < unanswerable:
                if rng.random() < 0.75:  # a fact the biographies never give
                    question = rng.choice(UNANSWERABLE).format(n=name)
                else:  # a person absent from the context
                    absent = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
                    while absent.split()[1] in context:
                        absent = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
                    question = QUESTIONS[key].format(n=absent)
                texts, starts = [], []
            else:
                answer, start = spans[key]
                question, texts, starts = QUESTIONS[key].format(n=name), [answer], [start]
                if multi_answers:
                    texts.append(answer)
                    starts.append(start)
                    if key == "year" and context[start - 3 : start] == "in ":
                        texts.append("in " + answer)
                        starts.append(start - 3)
                    else:
                        texts.append(answer)
                        starts.append(start)
            rows.append(
                {
                    "id": stable_id(split, len(rows)),
                    "title": title,
                    "context": context,
                    "question": question,
                    "answers": {"text": texts, "answer_start": starts},
                }
            )
    return rows


def record_rows(rng, n):
    rows = []
    for _ in range(n):
        person = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        org, city = rng.choice(ORGS), rng.choice(CITIES)
        month = rng.choice(MONTHS)
        passage = (
            f"{org} hired {person} as its new chief executive, the company said in {city}."
            f" {person.split()[1]} previously ran a rival firm.\n@highlight\n{person} will "
            f"start in {month}\n@highlight\n{org} shares rose in {city}"
        )
        kind = rng.randrange(3)
        if kind == 0:
            answer, query = person, f"@placeholder will lead {org} from {month}."
        elif kind == 1:
            answer, query = org, f"{person} was hired by @placeholder after a long search."
        else:
            answer, query = city, f"The announcement was made in @placeholder on {rng.choice(WEEKDAYS)}."
        starts, pos = [], passage.find(answer)
        while pos >= 0:
            starts.append(pos)
            pos = passage.find(answer, pos + 1)
        rows.append(
            {"context": passage, "question": query, "answers": {"text": [answer] * len(starts), "answer_start": starts}}
        )
    return rows


# ----------------------------------------------------------------------------- IR


class TopicDocs:
    """Documents built around topic pseudo-words; queries reuse 2-3 of a document's topic words."""

    def __init__(self, rng: random.Random, vocab: list[str]):
        self.rng, self.vocab = rng, vocab

    def topic(self) -> list[str]:
        return self.rng.sample(self.vocab, 4)

    def text(self, topic: list[str], n_words: int) -> str:
        rng = self.rng
        words = []
        for _ in range(n_words):
            r = rng.random()
            if r < 0.25:
                words.append(rng.choice(topic))
            elif r < 0.35:
                words.append(rng.choice(self.vocab))  # noise
            else:
                words.append(rng.choice(FILLER))
        words[: len(topic)] = topic  # every topic word appears at least once
        rng.shuffle(words)
        return " ".join(words) + "."

    def query(self, topic: list[str]) -> str:
        rng = self.rng
        keys = rng.sample(topic, rng.choice((2, 3)))
        return rng.choice(["what is {}", "{} definition", "how does {} work", "{}"]).format(" ".join(keys))

    def related(self, topic: list[str], shared: int) -> list[str]:
        """A topic sharing `shared` words with `topic`."""
        others = [w for w in self.vocab if w not in topic]
        return self.rng.sample(topic, shared) + self.rng.sample(others, 4 - shared)


@dataclass(frozen=True)
class Concepts:
    """The toy world's IR subjects: the topic pseudo-words grouped into concepts of four related
    terms. A document names three of its concept's terms, a query two or three, so a query may use
    a term its relevant document lacks: lexical overlap alone does not find it, knowing which terms
    belong together does (glossary pages in the world corpus teach that; docs/reproduce.md)."""

    groups: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, vocabulary: list[str], size: int = 4) -> Concepts:
        return cls(tuple(tuple(vocabulary[i : i + size]) for i in range(0, len(vocabulary) - size + 1, size)))

    def half(self, second: bool) -> Concepts:
        """The first half of the concepts (fine-tuning pairs) or the second (evaluation)."""
        middle = len(self.groups) // 2
        return Concepts(self.groups[middle:] if second else self.groups[:middle])


class ConceptDocs(TopicDocs):
    """TopicDocs whose topics are concepts: documents name three of the four terms."""

    def __init__(self, rng: random.Random, concepts: Concepts):
        super().__init__(rng, [word for group in concepts.groups for word in group])
        self.groups = concepts.groups

    def topic(self) -> list[str]:
        return list(self.rng.choice(self.groups))

    def text(self, topic: list[str], n_words: int) -> str:
        return super().text(self.rng.sample(topic, 3) if len(topic) == 4 else topic, n_words)

    def related(self, topic: list[str], shared: int) -> list[str]:
        """`shared` terms of `topic` and the rest from another concept."""
        other = self.rng.choice([g for g in self.groups if g[0] != topic[0] or set(g) != set(topic)])
        return self.rng.sample(topic, shared) + self.rng.sample(list(other), 4 - shared)


def _topic_docs(rng: random.Random, vocab) -> TopicDocs:
    """`vocab`: a word list (random topics) or Concepts (the toy world's)."""
    return ConceptDocs(rng, vocab) if isinstance(vocab, Concepts) else TopicDocs(rng, vocab)


def msmarco_pairs_rows(rng, vocab, n):
    docs = _topic_docs(rng, vocab)
    rows = []
    for _ in range(n):
        topic = docs.topic()
        rows.append({"query": docs.query(topic), "positive": docs.text(topic, 30)})
    return rows


def beir_msmarco(rng, vocab, test_queries: int = 20):
    """BeIR/msmarco corpus + queries and BeIR/msmarco-qrels train/validation/test (`test_queries`
    TREC-like queries, the first one with only non-relevant judgements)."""
    docs = _topic_docs(rng, vocab)
    corpus, queries = [], []
    qrels = {"train": [], "validation": [], "test": []}
    ids = iter(rng.sample(range(100000, 9000000), 2000))

    def add_doc(topic):
        did = next(ids)
        corpus.append({"_id": str(did), "title": "", "text": docs.text(topic, 30)})
        return did

    def add_query(topic):
        qid = next(ids)
        queries.append({"_id": str(qid), "title": "", "text": docs.query(topic)})
        return qid

    for split, n in (("train", 20), ("validation", 60)):
        for i in range(n):
            topic = docs.topic()
            qid = add_query(topic)
            qrels[split].append({"query-id": qid, "corpus-id": add_doc(topic), "score": 1})
            if i % 15 == 0:  # a query with two relevant documents
                qrels[split].append({"query-id": qid, "corpus-id": add_doc(topic), "score": 1})
    for i in range(test_queries):  # TREC-DL-like graded judgements
        topic = docs.topic()
        qid = add_query(topic)
        if i == 0:  # only non-relevant judgements: not an evaluated query
            grades = [0, 0]
        else:
            grades = [3, rng.choice((1, 2)), 0, 0]
        for grade in grades:
            doc_topic = topic if grade == 3 else docs.related(topic, 2 if grade else 1)
            qrels["test"].append({"query-id": qid, "corpus-id": add_doc(doc_topic), "score": grade})
    for _ in range(60):  # unjudged documents (only in the full corpus)
        add_doc(docs.topic())
    rng.shuffle(corpus)
    return corpus, queries, qrels


def beir_nq(rng, vocab, queries_n: int = 80):
    docs = _topic_docs(rng, vocab)
    corpus, queries, qrels = [], [], []
    n_docs = 0

    def add_doc(topic):
        nonlocal n_docs
        did = f"doc{n_docs}"
        n_docs += 1
        corpus.append({"_id": did, "title": topic[0].capitalize(), "text": docs.text(topic, 40)})
        return did

    for i in range(queries_n):
        topic = docs.topic()
        qid = f"test{i}"
        queries.append({"_id": qid, "title": "", "text": docs.query(topic) + "?"})
        for _ in range(2 if i % 10 == 0 else 1):
            qrels.append({"query-id": qid, "corpus-id": add_doc(topic), "score": 1})
    for _ in range(60):
        add_doc(docs.topic())
    rng.shuffle(corpus)
    return corpus, queries, qrels


def mldr(rng, vocab, test_queries: int = 50):
    docs = _topic_docs(rng, vocab)
    corpus, splits = [], {}
    n_docs = 0

    def add_doc(topic, n_words):
        nonlocal n_docs
        did = f"doc-en-{n_docs}"
        n_docs += 1
        corpus.append({"docid": did, "text": docs.text(topic, n_words)})
        return corpus[-1]

    n_query = 0
    for split, n in (("dev", 30), ("test", test_queries)):
        rows = []
        for i in range(n):
            topic = docs.topic()
            doc = add_doc(topic, 1100 if (split == "test" and i == 0) else rng.randrange(80, 160))
            rows.append(
                {
                    "query_id": f"q-en-{n_query}",
                    "query": docs.query(topic),
                    "positive_passages": [dict(doc)],
                    "negative_passages": [],
                }
            )
            n_query += 1
        splits[split] = rows
    for _ in range(40):
        add_doc(docs.topic(), rng.randrange(80, 160))
    rng.shuffle(corpus)
    return corpus, splits


# ----------------------------------------------------------------------------- world corpus
#
# The toy world's pretraining text is shaped like FineWeb-Edu next to its windows (docs/reproduce.md,
# "Toy learning"): a document is a page on one topic whose sentences share its entities, facts and
# vocabulary (a review, a news story, a biography, a company announcement, a question thread, a
# story, a glossary page), about as long as a toy window, so that a window holds one or two
# documents and most of a token's attention keys lie in its own document, as at paper scale
# (pretraining.data.context).

# Bumped whenever the toy world's documents or tasks change (reproduce.world refuses a world folder
# built by another version): 1 = short documents (issue 11), 2 = one-topic pages (issue 34).
WORLD_VERSION = 2

LIKED = {1: ("loved", "liked"), 0: ("hated", "disliked")}


def _review(rng: random.Random, lex: Lexicon) -> str:
    """A film review: every adjective has the review's polarity, stated by the words around it."""
    label = rng.randrange(2)
    adjectives = lex.pos_adj if label else lex.neg_adj
    loved, liked = LIKED[label]
    film, *parts = rng.sample(FILM_NOUNS, 4)

    def adj() -> str:
        return rng.choice(adjectives)

    def pair() -> tuple[str, str]:
        return tuple(rng.sample(adjectives, 2))

    sentences = [
        lambda: f"the {film} was {adj()} . i {loved} it .",
        lambda: "a {} and {} {} .".format(*pair(), film),
        lambda: f"critics who {liked} the {film} called it {adj()} .",
        lambda: "the {} is {} , {} even .".format(rng.choice(parts), *pair()),
        lambda: f"the {rng.choice(parts)} is {rng.choice(['really ', 'quite ', ''])}{adj()} .",
        lambda: f"overall , a {adj()} {film} .",
    ]
    return " ".join(rng.choice(sentences)() for _ in range(rng.randint(4, 7)))


# Entity kinds a news story keeps for all its sentences (its cast); dates, numbers and amounts are
# drawn anew in each sentence.
CAST_KINDS = {"PER", "PERSON", "ORG", "LOC", "GPE", "MISC", "NORP"}


def _news_story(rng: random.Random, lex: Lexicon) -> str:
    """A news story in one annotation scheme's templates about the same two people, organisations,
    places and groups: a person comes back by full name or by last name."""
    templates, entity_fn = rng.choice(
        [(CONLL_TEMPLATES, _conll_entity), (ONTO_TEMPLATES, _onto_entity), (UNER_TEMPLATES, _conll_entity)]
    )
    people = [(rng.choice(lex.first), rng.choice(lex.last)) for _ in range(2)]
    cast: dict[str, list] = {}

    def entity(rng_: random.Random, kind: str, lex_: Lexicon):
        if kind in ("PER", "PERSON"):
            first, last = rng_.choice(people)
            return kind, [first, last] if rng_.random() < 0.7 else [last]
        if kind in CAST_KINDS:
            if kind not in cast:
                cast[kind] = [entity_fn(rng_, kind, lex_) for _ in range(2)]
            return rng_.choice(cast[kind])
        return entity_fn(rng_, kind, lex_)

    return " ".join(" ".join(_fill(rng, rng.choice(templates), entity, lex)[0]) for _ in range(rng.randint(3, 5)))


def _biography_page(rng: random.Random) -> str:
    """The infobox biography the QA tasks ask about, and more sentences about the same person, the
    company they founded and their city."""
    name, _, context, spans = _biography(rng, infobox=True)
    first, last = name.split()
    city, year, org, product = (spans[key][0] for key in ("city", "year", "org", "product"))
    more = [
        f"{last} still lives in {city}.",
        f"{org} sells {product} in {rng.choice(CITIES)} and {city}.",
        f"{name} is best known for {org}.",
        f"Today {org} employs {rng.choice(NUMBERS)} hundred people in {city}.",
        f"{first} was born in {year}, in {city}.",
        f"Before {org}, {first} taught at {rng.choice(UNIVERSITIES)}.",
    ]
    return " ".join([context, *rng.sample(more, rng.randint(2, 4))])


def _company_news(rng: random.Random) -> str:
    """A company announcement of the ReCoRD passages' kind (with its highlights half of the time)
    and more sentences about the same company, chief executive and city."""
    person = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    org, city, month = rng.choice(ORGS), rng.choice(CITIES), rng.choice(MONTHS)
    passage = (
        f"{org} hired {person} as its new chief executive, the company said in {city}."
        f" {person.split()[1]} previously ran a rival firm."
    )
    more = [
        f"{person} will start in {month}.",
        f"{org} shares rose in {city}.",
        f"{person} will lead {org} from {month}.",
        f"{person} was hired by {org} after a long search.",
        f"The announcement was made in {city} on {rng.choice(WEEKDAYS)}.",
    ]
    chosen = rng.sample(more, rng.randint(2, 4))
    if rng.random() < 0.5:
        return passage + "".join(f"\n@highlight\n{sentence.rstrip('.')}" for sentence in chosen)
    return " ".join([passage, *chosen])


def _question_thread(rng: random.Random) -> str:
    """A forum thread on one topic: the how-to question in several wordings, and questions of
    another intent about the same topic."""
    v, o = rng.choice(QQP_TOPICS)
    questions = [rng.choice(QQP_A + QQP_B if rng.random() < 0.7 else QQP_OTHER) for _ in range(rng.randint(3, 6))]
    return " ".join(q.format(v=v, o=o).capitalize() for q in questions)


def _story(rng: random.Random) -> str:
    """What one person did at one place: events of the MNLI premises' kind, restated, explained or
    denied for another object, as the MNLI hypotheses do."""
    name, place = rng.choice(FIRST), rng.choice(rng.choice([PLACES_M, PLACES_MM]))
    sentences = []
    for _ in range(rng.randint(2, 3)):
        (past, base), obj = rng.choice(VERBS), rng.choice(OBJECTS)
        other = rng.choice([o for o in OBJECTS if o != obj])
        sentences.append(f"{name} {past} the {obj} in {place} .")
        sentences.append(
            rng.choice(
                [
                    f"{name} {past} the {obj} {rng.choice(REASONS)} .",
                    f"{name} {past} the {obj} with a neighbour .",
                    f"{name} enjoyed working on the {obj} .",
                    f"Someone {past} the {obj} .",
                    f"{name} was in {place} .",
                    f"{name} did not {base} the {other} .",
                ]
            )
        )
    return " ".join(sentences)


def ir_vocabulary(seed: int = DEFAULT_SEED) -> list[str]:
    """The topic pseudo-words of the IR tasks' documents and queries."""
    return pseudo_words(_rng(seed, "ir-vocabulary"), 400)


def _glossary_page(rng: random.Random, vocabulary: list[str]) -> str:
    """A page about one concept of the IR tasks (`Concepts`): its four terms, and no other concept's,
    recur among common words (a third of the words). Other concepts' terms as noise, as the IR
    documents have them, left toy_s MLM-40 below random initialisation on NQ and MS MARCO
    (docs/reproduce.md, "Toy learning")."""
    concept = list(rng.choice(Concepts.of(vocabulary).groups))
    words = [rng.choice(concept) if rng.random() < 0.35 else rng.choice(FILLER) for _ in range(rng.randint(30, 50))]
    words[:4] = concept
    rng.shuffle(words)
    return " ".join(words) + "."


# The kinds of toy-world documents and their shares of the documents.
WORLD_KINDS = {
    "review": (0.2, lambda rng, vocabulary: _review(rng, FULL_LEXICON)),
    "news": (0.25, lambda rng, vocabulary: _news_story(rng, FULL_LEXICON)),
    "biography": (0.1, lambda rng, vocabulary: _biography_page(rng)),
    "company": (0.1, lambda rng, vocabulary: _company_news(rng)),
    "questions": (0.1, lambda rng, vocabulary: _question_thread(rng)),
    "story": (0.1, lambda rng, vocabulary: _story(rng)),
    "glossary": (0.15, _glossary_page),
}


def world_corpus(documents: int, seed: int = DEFAULT_SEED) -> list[dict]:
    """Pretraining text of the toy world, `{"text", "id"}` rows (prepare-data reads them): pages on
    one topic each, of every kind the tasks use (`WORLD_KINDS`), with every word of `FULL_LEXICON`,
    the held-out half included, in contexts that give its class (the polarity of an adjective, the
    type of a name), and the IR tasks' topic words. It is what a pretrained toy model can know and
    an untrained one cannot (docs/reproduce.md, "Toy learning")."""
    rng = _rng(seed, "world-corpus")
    vocabulary = ir_vocabulary(seed)
    kinds = list(WORLD_KINDS)
    weights = [WORLD_KINDS[k][0] for k in kinds]
    rows = []
    for i in range(documents):
        kind = rng.choices(kinds, weights)[0]
        rows.append({"text": WORLD_KINDS[kind][1](rng, vocabulary), "id": f"toy-world-{seed}-{i}"})
    return rows


# ----------------------------------------------------------------------------- writing


def _rng(seed: int, name: str) -> random.Random:
    return random.Random(f"{seed}:{name}")


# Training rows per task in the toy world: a small model learns each task in one pass over its
# training set (batch 16), QQP and the QA tasks need longer (docs/reproduce.md, "Toy learning").
WORLD_TRAIN_ROWS = {"sc": 640, "qqp": 960, "tc": 640, "qa": 1280, "record": 640, "ir_pairs": 1280}
# Evaluation rows (the reported split) per task in the toy world, larger than the committed mirror's
# so that one untrained model's score is a fair reference per task: with 64 SC sentences or 40 IR
# queries one size's random initialisation differed from the next by 10-17 points (docs/reproduce.md).
WORLD_EVAL_ROWS = {"sc": 192, "msmarco": 100, "nq": 200, "mldr": 100}


def build(seed: int = DEFAULT_SEED, world: bool = False) -> dict[str, list[dict]]:
    """Relative path (`<hub_id>/<config>/<split>.jsonl`) -> rows.

    `world`: the toy world's tasks, where a pretrained model has something to add. SST-2 and the NER
    tasks train on `FULL_LEXICON.seen()`; the NER evaluation rows use `FULL_LEXICON.unseen()` and
    half the SST-2 ones do, so that only a model that met those words in `world_corpus` can label
    them. QQP has balanced labels and non-duplicates that ask another question on the same topic,
    the QA biographies are infoboxes, and the training splits are larger (`WORLD_TRAIN_ROWS`)."""

    def lexicon(split: str) -> Lexicon:
        if not world:
            return FULL_LEXICON
        return FULL_LEXICON.seen() if split == "train" else FULL_LEXICON.unseen()

    rows = WORLD_TRAIN_ROWS if world else {"sc": 320, "qqp": 320, "tc": 320, "qa": 320, "record": 320, "ir_pairs": 400}
    files: dict[str, list[dict]] = {}
    r = _rng(seed, "nyu-mll/glue/sst2")
    sc_eval = WORLD_EVAL_ROWS["sc"] if world else 64
    for split, n, hidden in (("train", rows["sc"], False), ("validation", sc_eval, False), ("test", 40, True)):
        # toy world: every other evaluation sentence with the training adjectives
        lexicons = (lexicon(split), FULL_LEXICON.seen()) if world and split != "train" else (lexicon(split),)
        files[f"nyu-mll/glue/sst2/{split}.jsonl"] = sst2_rows(r, n, hidden, lexicons, world and split != "train")
    r = _rng(seed, "nyu-mll/glue/qqp")
    for split, n, hidden in (("train", rows["qqp"], False), ("validation", sc_eval, False), ("test", 40, True)):
        files[f"nyu-mll/glue/qqp/{split}.jsonl"] = qqp_rows(r, n, hidden, 0.5 if world else 0.0, world)
    r = _rng(seed, "nyu-mll/glue/mnli")
    for split, n, hidden, places in (
        ("train", 640 if world else 360, False, PLACES_M),
        ("validation_matched", sc_eval, False, PLACES_M),
        ("validation_mismatched", sc_eval, False, PLACES_MM),
        ("test_matched", 40, True, PLACES_M),
        ("test_mismatched", 40, True, PLACES_MM),
    ):
        files[f"nyu-mll/glue/mnli/{split}.jsonl"] = mnli_rows(r, n, hidden, places)
    tc_splits = (("train", rows["tc"]), ("validation", 64), ("test", 64))
    r = _rng(seed, "hgissbkh/conll2003-en")
    for split, n in tc_splits:
        files[f"hgissbkh/conll2003-en/default/{split}.jsonl"] = conll_rows(r, n, split != "train", lexicon(split))
    r = _rng(seed, "hgissbkh/ontonotes5")
    for split, n in tc_splits:
        files[f"hgissbkh/ontonotes5/default/{split}.jsonl"] = ontonotes_rows(r, n, split != "train", lexicon(split))
    r = _rng(seed, "hgissbkh/uner_en")
    for split, n in tc_splits:
        files[f"hgissbkh/uner_en/default/{split}.jsonl"] = uner_rows(r, n, split, split != "train", lexicon(split))
    qa = {"infobox": True, "asked": WORLD_QUESTIONS} if world else {}
    r = _rng(seed, "rajpurkar/squad")
    files["rajpurkar/squad/plain_text/train.jsonl"] = squad_rows(r, rows["qa"], "train", False, 0.0, **qa)
    files["rajpurkar/squad/plain_text/validation.jsonl"] = squad_rows(r, 64, "validation", True, 0.0, **qa)
    r = _rng(seed, "rajpurkar/squad_v2")
    unanswerable = 0.25 if world else 0.33
    files["rajpurkar/squad_v2/squad_v2/train.jsonl"] = squad_rows(r, rows["qa"], "train", False, unanswerable, **qa)
    files["rajpurkar/squad_v2/squad_v2/validation.jsonl"] = squad_rows(r, 64, "validation", True, unanswerable, **qa)
    r = _rng(seed, "hgissbkh/record")
    files["hgissbkh/record/default/train.jsonl"] = record_rows(r, rows["record"])
    files["hgissbkh/record/default/validation.jsonl"] = record_rows(r, 64)
    vocab = ir_vocabulary(seed)
    # toy world: fine-tuning pairs on half of the concepts, evaluation on the other half
    train_vocab, eval_vocab = (
        (Concepts.of(vocab).half(False), Concepts.of(vocab).half(True)) if world else (vocab, vocab)
    )
    files["hgissbkh/msmarco-pairs/default/train.jsonl"] = msmarco_pairs_rows(
        _rng(seed, "hgissbkh/msmarco-pairs"), train_vocab, rows["ir_pairs"]
    )
    vocab = eval_vocab
    corpus, queries, qrels = beir_msmarco(
        _rng(seed, "BeIR/msmarco"), vocab, WORLD_EVAL_ROWS["msmarco"] if world else 20
    )
    files["BeIR/msmarco/corpus/corpus.jsonl"] = corpus
    files["BeIR/msmarco/queries/queries.jsonl"] = queries
    for split, split_rows in qrels.items():
        files[f"BeIR/msmarco-qrels/default/{split}.jsonl"] = split_rows
    corpus, queries, qrels = beir_nq(_rng(seed, "BeIR/nq"), vocab, WORLD_EVAL_ROWS["nq"] if world else 80)
    files["BeIR/nq/corpus/corpus.jsonl"] = corpus
    files["BeIR/nq/queries/queries.jsonl"] = queries
    files["BeIR/nq-qrels/default/test.jsonl"] = qrels
    corpus, splits = mldr(_rng(seed, "hgissbkh/mldr-en"), vocab, WORLD_EVAL_ROWS["mldr"] if world else 50)
    files["hgissbkh/mldr-en/corpus/corpus.jsonl"] = corpus
    for split, split_rows in splits.items():
        files[f"hgissbkh/mldr-en/default/{split}.jsonl"] = split_rows
    return files


def write(out_dir: Path, seed: int = DEFAULT_SEED, world: bool = False) -> list[Path]:
    """Write the toy mirror (`world`: the toy world's tasks) under `out_dir` (its previous contents
    of these paths replaced)."""
    out_dir = Path(out_dir)
    written = []
    for rel, rows in sorted(build(seed, world).items()):
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(row, ensure_ascii=True) + "\n" for row in rows)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def tree_digest(root: Path) -> str:
    """sha256 over the relative paths and bytes of every .jsonl file under `root`."""
    digest = hashlib.sha256()
    for path in sorted(Path(root).rglob("*.jsonl")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.datasets.make_toy", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("out_dir", type=Path, help="folder of the local mirror to write")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--clean", action="store_true", help="delete OUT_DIR first")
    parser.add_argument(
        "--world",
        action="store_true",
        help="the toy world's tasks: SST-2 and NER evaluation rows with words only the world corpus "
        "uses, learnable QQP and QA, larger training splits (docs/reproduce.md)",
    )
    parser.add_argument(
        "--world-corpus",
        type=int,
        metavar="DOCUMENTS",
        help="instead of the mirror, write OUT_DIR/world.jsonl: DOCUMENTS documents of toy-world "
        "pretraining text (every word with the context that gives its class)",
    )
    args = parser.parse_args(argv)
    if args.clean and args.out_dir.exists():
        shutil.rmtree(args.out_dir)
    if args.world_corpus is not None:
        path = args.out_dir / "world.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, "".join(json.dumps(row) + "\n" for row in world_corpus(args.world_corpus, args.seed)))
        print(f"wrote {args.world_corpus} documents ({path.stat().st_size / 1e6:.2f} MB) to {path}")
        return 0
    paths = write(args.out_dir, args.seed, args.world)
    size = sum(p.stat().st_size for p in paths)
    print(
        f"wrote {len(paths)} files ({size / 1e6:.2f} MB) under {args.out_dir}; digest {tree_digest(args.out_dir)[:16]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
