"""The MPI-IO settings sweep's proof, on runs recorded on this machine
(IOR 3.3 under Darshan 3.5 with per-rank records, Open MPI 4.1 and MPICH 4.0): which
ranks wrote the shared file, and when that shows a setting was ignored."""

from pathlib import Path

import pytest

from hpc_health.checklib.iohints import (
    IO_SETTINGS,
    IoSetting,
    expected_writers,
    not_applied,
    writers,
)
from hpc_health.parsers import ParseError
from hpc_health.parsers.darshan import file_rank_counters
from hpc_health.parsers.ior import ior_hints
from hpc_health.parsers.mpi_info import ompi_io_selected

DATA = Path(__file__).parent / "data"
FILE = "/tmp/iorx/testfile"


def _run(name):
    darshan = (DATA / "darshan" / f"darshan-parser_per_rank_{name}.txt").read_text()
    ior = (DATA / "ior" / f"ior_mpiio_hints_{name}.txt").read_text()
    return darshan, ior


def test_one_aggregator_means_one_rank_wrote_the_shared_file():
    darshan, ior = _run("romio_cb_one_aggregator")
    wrote, read, coll, indep = writers(darshan, FILE)
    assert (wrote, read, coll, indep) == ([0], [0], 16, 0)
    hints = ior_hints(ior)
    assert hints["returned"][0] == {"romio_cb_write": "enable", "romio_cb_read": "enable",
                                    "cb_nodes": "1"}
    assert ompi_io_selected(ior) == {"romio321"}
    assert not_applied(IO_SETTINGS["romio_one_aggregator"], 2, 1, wrote, hints["passed"],
                       hints["returned"], ompi_io_selected(ior)) is None


def test_collective_buffering_off_means_every_rank_wrote():
    darshan, ior = _run("romio_cb_disable")
    wrote, *_ = writers(darshan, FILE)
    assert wrote == [0, 1]
    hints = ior_hints(ior)
    assert not_applied(IO_SETTINGS["romio_cb_disable"], 2, 1, wrote, hints["passed"],
                       hints["returned"], ompi_io_selected(ior)) is None
    # Had one aggregator been asked for, this run would show it was not applied.
    why = not_applied(IO_SETTINGS["romio_one_aggregator"], 2, 1, wrote, hints["passed"],
                      [], {"romio321"})
    assert why.startswith("2 of 2 ranks wrote the shared file (Darshan, per rank), 1 should")


def test_ompio_ignores_romios_aggregator_hint_and_the_sweep_says_so():
    # Open MPI 4's MPI_File_get_info echoes cb_nodes=1; Darshan shows both
    # ranks wrote: the hint was not applied.
    darshan, ior = _run("ompio_cb_nodes_ignored")
    wrote, *_ = writers(darshan, FILE)
    hints = ior_hints(ior)
    assert hints["returned"][0] == {"cb_nodes": "1"}
    setting = IoSetting({"cb_nodes": "1"}, "ompio", what="OMPIO told cb_nodes=1")
    why = not_applied(setting, 2, 1, wrote, hints["passed"], hints["returned"],
                      ompi_io_selected(ior))
    assert why == ("2 of 2 ranks wrote the shared file (Darshan, per rank), 1 should have: "
                   "the library did not apply cb_nodes=1")


def test_a_file_opened_by_another_io_module_is_not_the_setting():
    darshan, ior = _run("ompio_cb_nodes_ignored")
    wrote, *_ = writers(darshan, FILE)
    why = not_applied(IO_SETTINGS["romio_cb_disable"], 2, 1, wrote, [{}], [],
                      ompi_io_selected(ior))
    assert why == "the file was opened by io/ompio, not romio"


def test_a_hint_the_library_returned_otherwise_is_named():
    why = not_applied(IO_SETTINGS["romio_cb_enable"], 2, 1, [0], [{"x": "1"}],
                      [{"romio_cb_write": "automatic", "romio_cb_read": "enable"}], {"romio"})
    assert why.startswith("the file was opened with romio_cb_write=automatic, not enable")


def test_expected_writers_follow_the_hints():
    assert expected_writers(IO_SETTINGS["romio_cb_enable"], 8, 2) == 2
    assert expected_writers(IO_SETTINGS["romio_one_aggregator"], 8, 2) == 1
    assert expected_writers(IO_SETTINGS["romio_cb_disable"], 8, 2) == 8
    assert expected_writers(IO_SETTINGS["romio_cb_automatic"], 8, 2) is None
    assert expected_writers(IO_SETTINGS["ompio_individual"], 8, 2) == 8
    assert expected_writers(IO_SETTINGS["ompio_vulcan"], 8, 2) is None


def test_a_log_reduced_over_the_ranks_cannot_name_the_writers():
    reduced = (DATA / "darshan" / "darshan-parser_ior_mpiio_collective_np2.txt").read_text()
    path = next(ln.split("\t")[5] for ln in reduced.splitlines()
                if ln.startswith("POSIX\t-1\t"))
    with pytest.raises(ParseError, match="DARSHAN_DISABLE_SHARED_REDUCTION=1"):
        writers(reduced, path)
    with pytest.raises(ParseError, match="no record of /nowhere"):
        file_rank_counters(reduced, "POSIX", "/nowhere")


@pytest.mark.parametrize("name, setting, wrote", [
    ("mpich_romio_cb_one_aggregator", "romio_one_aggregator", [0]),
    ("mpich_romio_cb_disable", "romio_cb_disable", [0, 1]),
])
def test_on_mpich_the_romio_settings_are_proven_by_the_writers_alone(name, setting, wrote):
    """Recorded with Debian's MPICH 4.0.2: no io module to report (ROMIO is
    all there is), the hints returned are ROMIO's whole set."""
    darshan, ior = _run(name)
    assert writers(darshan, FILE)[0] == wrote
    hints = ior_hints(ior)
    assert hints["returned"][0]["romio_filesystem_type"].startswith("UFS")
    assert ompi_io_selected(ior) == set()
    assert not_applied(IO_SETTINGS[setting], 2, 1, wrote, hints["passed"], hints["returned"],
                       set(), open_mpi=False) is None
    # Taken for Open MPI, the missing io module report is the reason.
    assert not_applied(IO_SETTINGS[setting], 2, 1, wrote, hints["passed"], hints["returned"],
                       set()).startswith("no process reported its io module")
    if setting == "romio_cb_disable":
        why = not_applied(IO_SETTINGS["romio_one_aggregator"], 2, 1, wrote, hints["passed"],
                          [], set(), open_mpi=False)
        assert why.startswith("2 of 2 ranks wrote the shared file (Darshan, per rank), 1 should")
