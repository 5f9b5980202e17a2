"""The Spack command lines the suite runs (hpc_health/spack/commands.py):
what each is, the time limit each gets, and the ensure line a build
fixture's job script runs (tests/test_dry_run.py checks it in real scripts)."""

import shlex

from hpc_health.spack import commands


def test_the_environments_commands_run_in_their_environment():
    assert commands.concretize("/e") == ["-e", "/e", "concretize", "-f"]
    assert commands.install("/e") == ["-e", "/e", "install", "--fail-fast"]
    assert commands.find_prefixes("/e", ["ior"]) == \
        ["-e", "/e", "find", "--format", "{name}\t{prefix}", "ior"]
    assert commands.python_script("/e", "/x/package_index.py") == \
        ["-e", "/e", "python", "/x/package_index.py"]
    assert [commands.env_of(c) for c in (commands.install("/e"), commands.version())] == ["/e", None]


def test_the_set_ups_commands():
    assert commands.version() == ["--version"]
    code = "import a\nprint(a)\n"
    assert commands.python_code(code) == ["python", "-c", f"exec({code!r})"]
    assert commands.mirror_create("/k/mirror", ["ior@3.3.0"]) == \
        ["-c", "concretizer:unify:false", "mirror", "create", "-d", "/k/mirror", "ior@3.3.0"]


def test_a_dry_runs_prefix_is_found_at_job_time_with_its_words_quoted():
    assert commands.location("/e nv", "ior") == "$(spack -e '/e nv' location -i ior)"


def test_each_command_has_its_limit_and_one_variable_sets_all(monkeypatch):
    monkeypatch.delenv(commands.LIMIT_VAR, raising=False)
    assert commands.limit_of(commands.install("/e")) == 4 * 3600
    assert commands.limit_of(commands.find_prefixes("/e", ["ior"])) == 300
    assert commands.limit_of(["spec", "zlib"]) == 1800
    monkeypatch.setenv(commands.LIMIT_VAR, "7")
    assert commands.limit_of(commands.install("/e")) == 7
    monkeypatch.setenv(commands.LIMIT_VAR, "soon")
    assert commands.limit_of(commands.concretize("/e")) == 1800


def test_the_ensure_line_passes_what_the_site_sets():
    args = commands.ensure("/py", "/bin/spack", "/envs/e", "/site/spack.yaml", "/site",
                           ["ior", "darshan-util"], {"stream": "/src@5.10"},
                           {"install_tree": "/opt", "builtin_repo": None})
    line = " ".join(shlex.quote(a) for a in args)
    assert commands.ENSURE_MARK in line
    assert args[:4] == ["/py", "-m", commands.ENSURE_MODULE, "ensure"]
    assert args.count("--spec") == 2 and "--builtin-repo" not in args
    assert args[args.index("--install-tree") + 1] == "/opt"
    assert args[args.index("--develop") + 1] == "stream=/src@5.10"
