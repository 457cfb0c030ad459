import pytest

from analysis.published import load_published_raw
from contracts.model_names import format_model_name, parse_model_name, replicate_name, split_replicate


def test_every_published_checkpoint_name_parses_and_matches_its_printed_steps():
    raw = load_published_raw().drop_duplicates("hf_model_id_inferred")
    for row in raw.itertuples():
        desc = parse_model_name(row.hf_model_id_inferred)
        assert desc is not None, row.hf_model_id_inferred
        assert format_model_name(desc) == row.hf_model_id_inferred
        assert desc.checkpoint_step == row.pretraining_steps
        if desc.objective in ("clm", "mlm", "clm+mlm"):
            assert (desc.clm_steps, desc.mlm_steps) == (row.clm_steps, row.mlm_steps)
        if desc.objective == "cpt":
            assert desc.cpt_steps == row.cpt_steps
            assert desc.cpt_base_objective == row.cpt_base_objective.lower()


@pytest.mark.parametrize(
    "name, objective, ratio, clm, mlm, decayed",
    [
        ("610m-clm-40k-mlm20-42k", "clm+mlm", 0.2, 40000, 2000, True),
        ("MLMvsCLM/610m-mlm40-42k-10000", "mlm", 0.4, 0, 10000, False),
        ("toy_s-clm-50-mlm30-200", "clm+mlm", 0.3, 50, 150, True),
        ("toy_m-mlm40-dec200-mlm40-300", "cpt", 0.4, 0, 300, True),
    ],
)
def test_parse_variants(name, objective, ratio, clm, mlm, decayed):
    desc = parse_model_name(name)
    assert (desc.objective, desc.masking_ratio, desc.clm_steps, desc.mlm_steps, desc.decayed) == (
        objective,
        ratio,
        clm,
        mlm,
        decayed,
    )
    assert format_model_name(desc) == name.split("/")[-1]


@pytest.mark.parametrize(
    "name",
    [
        "bert-base-uncased",
        "answerdotai/ModernBERT-base",
        "610m-clm-42k-mlm40-42k",
        "610m-mlm40-42k-50000",
        "610m-clm-dec42k-mlm40-42k",
    ],
)
def test_external_or_impossible_names_have_no_description(name):
    assert parse_model_name(name) is None


@pytest.mark.parametrize(
    "name, configuration, k",
    [
        ("610m-clm-42k-rep2", "610m-clm-42k", 2),
        ("MLMvsCLM/610m-mlm40-42k-rep3", "610m-mlm40-42k", 3),
        ("610m-clm-42k-10000-rep2", "610m-clm-42k-10000", 2),
        ("toy_s-clm-50-mlm30-200-rep12", "toy_s-clm-50-mlm30-200", 12),
        ("610m-clm-42k", "610m-clm-42k", 1),
    ],
)
def test_a_replicate_parses_to_its_configuration(name, configuration, k):
    """Issue 36: a second pretraining run of one configuration has a name (`-rep<k>`, k >= 2)
    that parses to the configuration's description; replicate_name writes it back."""
    assert split_replicate(name) == (configuration, k)
    assert parse_model_name(name) == parse_model_name(configuration) is not None
    assert replicate_name(configuration, k) == name.split("/")[-1]


@pytest.mark.parametrize(
    "name",
    [
        "610m-clm-42k-rep1",
        "610m-clm-42k-rep02",
        "my-encoder-rep2",
        "610m-clm-42k-rep",
        # issue 56: Unicode digits, a trailing newline and an unbounded k collided with `-rep2`
        "610m-clm-42k-rep\u0662",
        "610m-clm-42k-rep2\n",
        "610m-clm-42k-rep1000",
    ],
)
def test_names_that_only_look_like_replicates(name):
    assert split_replicate(name) == (name, 1) and parse_model_name(name) is None


def test_replicate_numbers_are_bounded():
    assert replicate_name("610m-clm-42k", 999) == "610m-clm-42k-rep999"
    for k in (0, 1000):
        with pytest.raises(ValueError, match="from 1 to 999"):
            replicate_name("610m-clm-42k", k)
