"""The wheels carried to the GPU machine (issue 55): the pinned list and the download script's
pure logic, without network (the download itself is checked by hand, see the script's doc)."""

from pathlib import Path

import pytest

from container import device_wheels as dw
from container.image_check import read_lock

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pins():
    return dw.read_pins(dw.DEFAULT_LIST)


@pytest.fixture(scope="module")
def image():
    return dw.parse_pins(dw.DEFAULT_IMAGE.read_text(), allow_bare=True)


@pytest.fixture(scope="module")
def lock():
    return read_lock((REPO / "requirements.lock").read_text())


def test_list_parses_one_exact_pin_each(pins):
    assert {"mosaicml", "mosaicml-streaming", "datasets", "seqeval", "pytrec-eval-terrier", "transformers"} <= set(pins)
    assert all(version and version[0].isdigit() for version in pins.values())
    with pytest.raises(ValueError, match="listed twice"):
        dw.parse_pins("datasets==5.0.1\nDatasets==5.0.1\n")
    with pytest.raises(ValueError, match="not an exact pin"):
        dw.parse_pins("datasets>=5\n")
    with pytest.raises(ValueError, match="not an exact pin"):
        dw.parse_pins("datasets\n")


def test_pins_are_the_locks_versions(pins, lock):
    assert pins["mosaicml"] == "0.32.1" and pins["mosaicml-streaming"] == "0.13.0"
    different = {
        name: (version, lock[name]) for name, version in pins.items() if name in lock and lock[name] != version
    }
    assert different == {}
    # the device stack is the lock's, minus what the image has, plus the container's GPU additions
    # that run on the image's own torch (liger-kernel: pure Python over Triton; not flash-attn, a
    # build for torch 2.7)
    from container.image_check import GPU_ADDITIONS, canonical

    outside = {name: pins[name] for name in set(pins) - set(lock)}
    assert outside == {"liger-kernel": GPU_ADDITIONS["liger-kernel"]}
    assert all(canonical(name) in {canonical(k) for k in GPU_ADDITIONS} for name in outside)


def test_image_list_parses_with_the_known_versions(image):
    assert image["torch"] == "2.11.0" and image["transformers"] == "5.17.0" and image["numpy"] == "2.5.2"
    assert image["tokenizers"] == "0.23.2" and image["huggingface-hub"] == "1.33.0"
    assert "pandas" in image and image["pandas"] is None  # on the image, version not given


def test_nothing_the_image_has_unless_the_lock_needs_another_version(pins, image, lock):
    overlap = set(pins) & set(image)
    assert overlap == set(dw.REPLACES_IMAGE), "carry an image package only with a reason in REPLACES_IMAGE"
    for name in overlap:
        assert dw.REPLACES_IMAGE[name].strip()
        assert image[name] != pins[name], f"{name}: the image already has {pins[name]}"
        assert lock[name] == pins[name]
    for name in ("torch", "numpy", "torchvision", "pyarrow", "pandas", "safetensors", "torchmetrics"):
        assert name not in pins


def test_pip_command_targets_cpython_312_manylinux_x86_64(pins, tmp_path):
    command = dw.pip_download_command(pins, tmp_path / "w", python="python3")
    assert command[:4] == ["python3", "-m", "pip", "download"]
    assert "--no-deps" in command and "--only-binary=:all:" in command
    assert command[command.index("--python-version") + 1] == "3.12"
    assert command[command.index("--implementation") + 1] == "cp"
    platforms = [command[i + 1] for i, arg in enumerate(command) if arg == "--platform"]
    assert {"manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"} <= set(platforms)
    assert all(p.startswith("manylinux") and p.endswith("_x86_64") for p in platforms)
    assert command[command.index("-d") + 1] == str(tmp_path / "w")
    assert "mosaicml==0.32.1" in command and "transformers==4.57.6" in command
    binary, built = dw.split_pins(pins)
    assert set(built) == {"seqeval"} and "seqeval" not in binary
    wheel = dw.pip_wheel_command(built, tmp_path, python="python3")
    assert wheel[3] == "wheel" and "--no-deps" in wheel and "seqeval==1.2.2" in wheel


def test_wheel_names_match_pins():
    pins = {"ruamel-yaml": "0.19.1", "pytrec-eval-terrier": "0.5.11", "seqeval": "1.2.2"}
    files = [
        "ruamel_yaml-0.19.1-py3-none-any.whl",
        "pytrec_eval_terrier-0.5.11-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "seqeval-1.2.2-py3-none-any.whl",
    ]
    dw.check_one_each(pins, files)
    matched, stray = dw.match_wheels(pins, files + ["seqeval-1.2.1-py3-none-any.whl", "notes.txt"])
    assert stray == ["notes.txt", "seqeval-1.2.1-py3-none-any.whl"]
    assert dw.is_pure_python(files[2]) and not dw.is_pure_python(files[1])
    with pytest.raises(dw.Refused, match="no wheel for: seqeval==1.2.2"):
        dw.check_one_each(pins, files[:2])
    with pytest.raises(dw.Refused, match="more than one wheel for: seqeval"):
        dw.check_one_each(pins, files + ["seqeval-1.2.2-1-py3-none-any.whl"])
    with pytest.raises(dw.Refused, match="not in the list"):
        dw.check_one_each(pins, files + ["boto3-1.44.5-py3-none-any.whl"])


def test_folder_with_a_stray_wheel_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    listing = tmp_path / "list.txt"
    listing.write_text("coolname==2.2.0\n")
    out = tmp_path / "whl"
    out.mkdir()
    (out / "coolname-2.2.0-py2.py3-none-any.whl").write_bytes(b"x")
    (out / "boto3-1.44.5-py3-none-any.whl").write_bytes(b"x")
    monkeypatch.setattr(dw, "download", lambda *a: pytest.fail("downloaded into a refused folder"))
    assert dw.main(["--out", str(out), "--list", str(listing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "boto3-1.44.5-py3-none-any.whl" in err and "refused" in err


def test_size_check_fails_above_40_mib(tmp_path, monkeypatch, capsys):
    assert dw.LIMIT_MIB == 40
    assert dw.check_size([20 * 2**20, 19 * 2**20]) == pytest.approx(39.0)
    with pytest.raises(dw.Refused, match="41.00 MiB, over the 40 MiB limit"):
        dw.check_size([20 * 2**20, 21 * 2**20])
    listing = tmp_path / "list.txt"
    listing.write_text("coolname==2.2.0\nseqeval==1.2.2\n")

    def fake_download(pins, out):  # two big files where pip would put the wheels
        out.mkdir(parents=True, exist_ok=True)
        for name in ("coolname-2.2.0-py2.py3-none-any.whl", "seqeval-1.2.2-py3-none-any.whl"):
            with open(out / name, "wb") as handle:
                handle.truncate(21 * 2**20)
        return sorted(out.glob("*.whl"))

    monkeypatch.setattr(dw, "download", fake_download)
    assert dw.main(["--out", str(tmp_path / "whl"), "--list", str(listing)]) == 2
    assert capsys.readouterr().err.strip().endswith("over the 40 MiB limit")


def test_whl_folder_is_ignored():
    assert "/.whl/" in (REPO / ".gitignore").read_text().splitlines()


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "folder", "2 MiB file"])
def test_a_list_that_is_no_small_regular_file_is_one_line(tmp_path, capsys, kind):
    """Issue 66, item 7: `--list /dev/zero` was a MemoryError traceback (a FIFO would wait for ever)."""
    import os

    from container import device_wheels

    path = tmp_path / "list.txt"
    if kind == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_text("torch==2.0.0\n")
        os.truncate(path, 2 << 20)
    assert device_wheels.main(["--list", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"device_wheels: {path}: "), err
    assert ("2,097,152 bytes" if kind == "2 MiB file" else "not a regular file") in err[0], err
    assert not (tmp_path / "out").exists()
