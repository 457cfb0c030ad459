"""The containment rule (contracts.paths, issue 78): unit cases from the hostile corpus and
property-based cases (Hypothesis) over arbitrary text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts.paths import UnsafeNameError, check_name, contained, move_inside, name_problem, resolve_recorded
from tests import hostile


@pytest.mark.parametrize("case", list(hostile.TRAVERSAL_NAMES))
def test_each_hostile_name_is_refused_in_one_line_naming_its_source(case):
    with pytest.raises(UnsafeNameError) as caught:
        check_name(hostile.TRAVERSAL_NAMES[case], "index.json: shard basename")
    message = str(caught.value)
    assert message.startswith("index.json: shard basename: name ") and "\n" not in message
    assert len(message) < 300  # an overlong name is shown cut, not whole


def test_ordinary_names_pass_and_stay_under_the_root(tmp_path):
    for name in ["config.json", "part-00000/shard.00000.mds.zstd", "1_Pooling/config.json", "é/ü.txt", "a b", "-x"]:
        assert contained(tmp_path, name, "test") == tmp_path / name


def test_a_link_on_the_way_or_at_the_end_is_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "inside").mkdir()
    (root / "inside" / "inner").symlink_to(root / "inside")  # even one that stays inside
    (root / "file").symlink_to(outside / "victim.txt")
    for name in ["escape/victim.txt", "inside/inner/x", "file"]:
        with pytest.raises(UnsafeNameError, match="is a link"):
            contained(root, name, "test")


def test_the_root_itself_may_be_a_link(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "given").symlink_to(real, target_is_directory=True)
    assert contained(tmp_path / "given", "a/b.txt", "test") == tmp_path / "given" / "a" / "b.txt"


def test_move_inside_creates_the_folders_and_refuses_a_link_swapped_in_after_the_check(tmp_path, monkeypatch):
    """Issue 88: the move that keeps a downloaded file. A link already on the way is `contained`'s
    refusal; one swapped in after that check (simulated: the check passed) is refused by the
    folders' walk, which follows no link, and nothing is written through it."""
    import contracts.paths

    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (tmp_path / "file").write_text("payload")
    assert move_inside(tmp_path / "file", root, "a/b/c.txt", "test") == root / "a" / "b" / "c.txt"
    assert (root / "a" / "b" / "c.txt").read_text() == "payload"

    (root / "a" / "b").rename(tmp_path / "moved")
    (root / "a" / "b").symlink_to(outside, target_is_directory=True)
    (tmp_path / "file").write_text("payload")
    with pytest.raises(UnsafeNameError, match="is a link"):
        move_inside(tmp_path / "file", root, "a/b/c.txt", "test")
    monkeypatch.setattr(contracts.paths, "contained", lambda root, name, source: Path(root, name))
    with pytest.raises(UnsafeNameError, match=r"a/b is a link: links are not followed into writes\): remove it"):
        move_inside(tmp_path / "file", root, "a/b/c.txt", "test")
    assert list(outside.iterdir()) == [] and (tmp_path / "file").is_file()


def test_a_recorded_relative_path_is_read_against_the_study_not_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_recorded(tmp_path / "moved" / "study", "pretraining") == tmp_path / "moved" / "study" / "pretraining"
    assert resolve_recorded(tmp_path / "study", "/abs/runs") == Path("/abs/runs")


# --- properties ------------------------------------------------------------------------------------
PARTS = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/\\"), min_size=1, max_size=20)
SAFE_PARTS = PARTS.filter(lambda p: p not in (".", "..") and name_problem(p) is None)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.one_of(
        st.text(max_size=40), st.lists(st.sampled_from(["..", ".", "", "a", "/", "\\"]), max_size=6).map("/".join)
    )
)
def test_any_text_is_either_refused_or_a_path_inside_the_root(tmp_path, name):
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    try:
        path = contained(root, name, "hypothesis")
    except UnsafeNameError as exc:
        assert "\n" not in str(exc)
        return
    assert Path(os.path.normpath(path)).is_relative_to(root) and path.resolve().is_relative_to(root.resolve())
    assert ".." not in path.relative_to(root).parts


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(SAFE_PARTS, min_size=1, max_size=5))
def test_every_name_of_ordinary_parts_passes(tmp_path, parts):
    name = "/".join(parts)
    assert contained(tmp_path, name, "hypothesis") == tmp_path.joinpath(*parts)


@settings(max_examples=200, deadline=None)
@given(prefix=st.lists(SAFE_PARTS, max_size=3), suffix=st.lists(SAFE_PARTS, max_size=3))
def test_a_dot_dot_part_anywhere_is_refused(prefix, suffix):
    with pytest.raises(UnsafeNameError):
        check_name("/".join([*prefix, "..", *suffix]), "hypothesis")
