"""reproduce.studies: which checkpoints each figure and table needs, and their toy names (pure logic)."""

import pytest

from analysis.published import load_published_raw
from contracts.model_names import parse_model_name
from pretraining import registry
from reproduce.plan import studies as st


@pytest.mark.parametrize(
    "kind, number, study",
    [
        ("figure", 2, "masking"),
        ("figure", 3, "masking"),
        ("figure", 5, "masking"),
        ("table", 4, "masking"),
        ("figure", 4, "data-efficiency"),
        ("figure", 10, "data-efficiency"),
        ("table", 9, "data-efficiency"),
        ("figure", 6, "biphasic"),
        ("table", 10, "biphasic"),
        ("table", 13, "biphasic"),
        ("figure", 7, "masking-after-clm"),
        ("figure", 8, "cpt"),
        ("figure", 9, "cpt"),
        ("figure", 12, "cpt"),
        ("table", 14, "cpt"),
        ("table", 17, "cpt"),
    ],
)
def test_every_figure_and_table_maps_to_its_study(kind, number, study):
    assert st.study_for(**{kind: number}).name == study


@pytest.mark.parametrize(
    "kind, number, words",
    [
        ("figure", 11, "1B 25/75"),
        ("figure", 1, "not one of the paper.s result figures"),
        ("table", 1, "settings"),
        ("figure", 13, "not in the paper's reproducible figures"),
        ("table", 18, r"tables \[2, 3"),
    ],
)
def test_others_are_one_line_errors(kind, number, words):
    with pytest.raises(st.StudyError, match=words) as error:
        st.study_for(**{kind: number})
    assert "\n" not in str(error.value)


def test_the_studies_cover_the_50_released_checkpoints_exactly():
    names = [n for s in st.STUDIES.values() for n in s.checkpoints]
    assert set(names) == set(registry.released_checkpoints())
    for study in st.STUDIES.values():
        assert len(set(study.checkpoints)) == len(study.checkpoints)


def test_each_table_lists_only_checkpoints_of_its_study():
    raw = load_published_raw()
    for study in st.STUDIES.values():
        rows = set(raw[raw["table"].isin(study.tables)]["hf_model_id_inferred"])
        assert rows <= set(study.checkpoints), study.name
        if study.tables:
            assert rows


@pytest.mark.parametrize(
    "paper, toy",
    [
        ("610m-mlm40-42k", "toy_m-mlm40-42"),
        ("610m-clm-42k-1000", "toy_m-clm-42-1"),
        ("610m-clm-3k-mlm40-12k", "toy_m-clm-3-mlm40-12"),
        ("610m-clm-40k-mlm20-42k", "toy_m-clm-40-mlm20-42"),
        ("610m-mlm40-dec42k-mlm40-64k", "toy_m-mlm40-dec42-mlm40-64"),
        ("1b-clm-42k", "toy_l-clm-42"),
    ],
)
def test_toy_names_divide_every_step_count_by_1000(paper, toy):
    assert st.scaled_name(paper, "toy") == toy
    assert st.scaled_name(paper, "paper") == paper
    p, t = parse_model_name(paper), parse_model_name(toy)
    for field in ("clm_steps", "mlm_steps", "cpt_steps", "schedule_steps", "checkpoint_step"):
        assert getattr(t, field) == getattr(p, field) // 1000
    assert (t.objective, t.masking_ratio, t.decayed) == (p.objective, p.masking_ratio, p.decayed)


def test_masking_runs_can_be_shortened():
    assert st.scaled_name("210m-mlm40-42k", "toy", length_42k=8) == "toy_s-mlm40-8"


def test_checkpoints_come_from_registry_runs_and_cpt_bases_train_first():
    cpt = st.checkpoints(st.STUDIES["cpt"], "toy", only=("610m-mlm40-dec42k-mlm40-54k",))
    assert [(c.name, c.run_name, c.step) for c in cpt] == [
        ("toy_m-mlm40-dec42-mlm40-54", "toy_m-mlm40-dec42-mlm40-54", 12)
    ]  # 12 CPT steps after the base
    assert st.runs_to_train(cpt, "separate") == ["610m-mlm40-42k", "610m-mlm40-dec42k-mlm40-54k"]
    # the default recipe: the 12k model is a decay branch of the 22k run, trained first
    assert st.runs_to_train(cpt, scale="toy") == [
        "610m-mlm40-42k",
        "610m-mlm40-dec42k-mlm40-64k",
        "610m-mlm40-dec42k-mlm40-54k",
    ]
    eff = st.checkpoints(st.STUDIES["data-efficiency"], "paper", only=("610m-clm-42k-5000", "610m-clm-42k"))
    assert [(c.name, c.run_name, c.step) for c in eff] == [
        ("610m-clm-42k-5000", "610m-clm-42k", 5000),
        ("610m-clm-42k", "610m-clm-42k", 42000),
    ]
    assert st.runs_to_train(eff) == ["610m-clm-42k"]
    with pytest.raises(st.StudyError, match="not in study cpt"):
        st.checkpoints(st.STUDIES["cpt"], "toy", only=("610m-mlm20-42k",))


def test_targets_list_every_reproducible_figure_and_table():
    targets = st.targets()
    assert "FIGURE=4 (data-efficiency)" in targets and "TABLE=17 (cpt)" in targets
    tables = [t for t in targets if t.startswith("TABLE=")]
    assert len(tables) == 16


def test_toy_runs_export_only_the_steps_their_study_fine_tunes(tmp_path):
    from reproduce.plan import ReproduceConfig, build_plan

    masking = ReproduceConfig(out=str(tmp_path / "m"), sizes=("toy_m",), ratios=(0.4,), clm=False)
    # the registry run 610m-mlm40-42k also exports 1k-40k for the data-efficiency study
    assert registry.RUNS["610m-mlm40-42k"].checkpoint_steps
    assert build_plan(masking).run("toy_m-mlm40-250").config["train"]["checkpoint_steps"] == []  # the final one only
    efficiency = ReproduceConfig(out=str(tmp_path / "d"), study="data-efficiency", checkpoints=("610m-mlm40-42k-5000",))
    assert build_plan(efficiency).run("toy_m-mlm40-1k").config["train"]["checkpoint_steps"] == [119]  # 5k of 42k
    paper = ReproduceConfig(
        out=str(tmp_path / "p"), scale="paper", sizes=("610m",), ratios=(0.4,), clm=False, data_root=None
    )
    assert build_plan(paper).run("610m-mlm40-42k").config["train"]["checkpoint_steps"] == list(
        registry.RUNS["610m-mlm40-42k"].checkpoint_steps
    )
