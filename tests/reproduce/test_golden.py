"""The orchestrator's outputs are what they were before reproduce/ was reorganised (issue 79): the
toy and the paper DAG of Figure 3 from a dry run, file by file (tests/reproduce/golden.py says
what is normalised: the machine's folders, times and the hashes of texts that hold them)."""

import json

import pytest

from tests.reproduce import golden


@pytest.mark.parametrize("scale", ["toy", "paper"])
def test_the_dry_run_writes_the_golden_dag(scale, tmp_path):
    expected = json.loads(golden.golden_file(scale).read_text())
    found = golden.dry_run_outputs(tmp_path, scale)
    assert sorted(found) == sorted(expected)
    changed = [name for name in expected if found[name] != expected[name]]
    assert not changed, f"{len(changed)} files differ from the golden DAG: {changed[:5]}"
