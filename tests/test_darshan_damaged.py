"""darshan-parser output that lost its module list: a ParseError naming what
is missing, never a crash of the parser itself."""

from pathlib import Path

import pytest

from hpc_health.parsers import ParseError
from hpc_health.parsers.darshan import parse_darshan

DATA = Path(__file__).resolve().parent / "data" / "darshan"


@pytest.mark.parametrize("name", ["darshan-parser_ior_posix_shared_nonmpi_rank0.txt",
                                  "darshan-parser_ior_mpiio_collective_np2.txt"])
def test_output_without_module_regions_is_a_parse_error(name):
    text = (DATA / name).read_text()
    # The regions block keeps its heading and the header/job/record lines,
    # but lists no module: what a log written without any module data would
    # print, except that such a log says "# no module data available.".
    region = "# POSIX module: "
    assert region in text
    damaged = "\n".join(line for line in text.splitlines()
                        if not (line.startswith("# ") and " module: " in line
                                and "(compressed), ver=" in line)) + "\n"
    with pytest.raises(ParseError, match="lists no modules"):
        parse_darshan(damaged)
