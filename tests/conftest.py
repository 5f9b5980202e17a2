"""Fixtures every test module can ask for by name (pytest finds them here);
the helpers they build on are in sandbox.py and store_fixtures.py."""

import os

import pytest
from sandbox import without_spack


@pytest.fixture
def spack_hidden(monkeypatch, tmp_path):
    """This process's environment (and so every command it starts) without
    this machine's Spack: our kernels then build with CMake.  A module uses
    it with ``pytest.mark.usefixtures("spack_hidden")``."""
    for key, value in without_spack(os.environ, tmp_path / "x").items():
        monkeypatch.setenv(key, value)
    for key in ("SPACK_ROOT", "HPC_HEALTH_SPACK_KIT"):
        monkeypatch.delenv(key, raising=False)
