"""The claims table in README.md is what `python -m analysis claims --published` computes."""

import re
from pathlib import Path

import pytest

from analysis.claims import NOT_TESTABLE

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| `(?P<claim>\w+)`[^|]*\| (?P<estimate>[^|]+) \| (?P<p>[^|]+) \| (?P<verdict>[^|]+) \|$")


def _readme_rows() -> dict[str, dict[str, str]]:
    rows = {m["claim"]: m.groupdict() for line in README.read_text().splitlines() if (m := ROW.match(line))}
    return {k: v for k, v in rows.items() if v["estimate"].strip() == "—" or "[" in v["estimate"]}


def test_readme_lists_the_published_verdicts(published_claims_report):
    report = published_claims_report.set_index("claim")
    rows = _readme_rows()
    assert set(rows) == set(report.index)
    for claim, row in rows.items():
        got = report.loc[claim]
        if got["verdict"] == NOT_TESTABLE:
            assert row["verdict"].startswith("not testable"), claim
            continue
        assert row["verdict"].strip() == got["verdict"], claim
        estimate, low, high = map(float, re.findall(r"-?\d+\.\d+", row["estimate"]))
        assert estimate == pytest.approx(got["estimate"], abs=0.006), claim
        assert (low, high) == pytest.approx((got["ci_low"], got["ci_high"]), abs=0.006), claim
