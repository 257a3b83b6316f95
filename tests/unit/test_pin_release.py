"""Pinning a release: the labs' set-up cells and the config name one ref."""

import shutil

import pytest

from book_helpers import ROOT, script_module

release = script_module("pin_release")


@pytest.fixture
def copy(tmp_path):
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    shutil.copytree(
        ROOT / "labs", tmp_path / "labs", ignore=shutil.ignore_patterns("*.py")
    )
    return tmp_path


def test_pinning_rewrites_the_config_and_every_setup_cell_to_one_ref(copy):
    changed = release.pin("v9.9.9", copy)
    labs = sorted((copy / "labs").glob("*.ipynb"))
    assert set(changed) == {copy / "_config.yml", *labs}
    assert "  branch: v9.9.9" in (copy / "_config.yml").read_text()
    for lab in labs:
        assert 'gpu-clusters-book@v9.9.9\\"' in lab.read_text(), lab.name
    assert release.pin("v9.9.9", copy) == []  # twice is once


def test_a_pinned_copy_keeps_the_contracts(copy):
    """The setup cell and the Colab link name the configured ref, as at a release."""
    import nbformat
    import yaml

    release.pin("3e757a7", copy)
    repo = yaml.safe_load((copy / "_config.yml").read_text())["repository"]
    owner_repo = repo["url"].removeprefix("https://github.com/")
    for lab in sorted((copy / "labs").glob("[0-9]*.ipynb")):
        nb = nbformat.read(lab, as_version=4)
        setup = next(c for c in nb.cells if c.cell_type == "code").source
        assert f"git+{repo['url']}@3e757a7" in setup
        link = f"/github/{owner_repo}/blob/3e757a7/labs/{lab.name}"
        assert link in nb.cells[0].source, lab.name


def test_a_bad_ref_is_refused(copy):
    with pytest.raises(ValueError, match="ref="):
        release.pin("main; rm -rf /", copy)
