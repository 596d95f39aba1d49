"""Compiling and caching Stan programs."""

import multiprocessing
import re
import shutil
import time
from pathlib import Path

import pytest

from stanaccel.cli import build_parser
from stanaccel.cli import main as cli_main
from stanaccel.programs import program_path
from stanaccel.sampling import sample
from stanaccel.sampling.program import Program
from stanaccel.stan import StanCompileError, compile_program
from stanaccel.stan.cache import build_once, content_hash
from stanaccel.stan.compiler import read_program, translate


def test_second_compile_hits_the_cache(mvn_program):
    before = mvn_program.library.stat().st_mtime_ns
    start = time.perf_counter()
    again = compile_program(program_path("mvn_mean"))
    seconds = time.perf_counter() - start
    assert not again.built
    assert again.library == mvn_program.library
    assert again.library.stat().st_mtime_ns == before
    print(f"cache hit loaded in {seconds:.2f} s")


def test_programs_share_nothing_but_the_bridge(reject_program, mvn_program):
    assert reject_program.library != mvn_program.library
    assert reject_program.library.parent == mvn_program.library.parent


def test_any_file_name_compiles_and_loads_again(reject_program, tmp_path):
    assert reject_program.name == "r_g_mod_le_model"  # an ASCII identifier for C++ and Python
    copy = tmp_path / "rég modèle.stan"
    copy.write_text(reject_program.code)
    again = compile_program(copy)
    assert not again.built and again.library == reject_program.library
    assert again.module.Model("{}", 0).param_unc_num() == 1


def test_syntax_error_names_the_users_file(tmp_path):
    path = tmp_path / "my modèle.stan"
    path.write_text("parameters {\n  real y\n}\nmodel {\n  y ~ normal(0, 1);\n}\n")
    with pytest.raises(StanCompileError, match="'my modèle.stan', line 3"):
        compile_program(path)
    with pytest.raises(StanCompileError, match="'my modèle.stan', line 3"):
        _ = Program.of(path).info


@pytest.mark.parametrize("name", ["gp_ard", "progs/reg", "nowhere.stan"])
def test_a_name_that_is_not_a_file_is_not_read_as_code(name):
    with pytest.raises(FileNotFoundError, match="Stan program file not found.*program_path"):
        compile_program(name)


def test_content_hash_depends_on_every_part():
    assert content_hash("a", "b") != content_hash("ab", "")
    assert content_hash("a", "b") == content_hash("a", "b")


def _slow_build(target, results):
    def build(tmp):
        time.sleep(0.5)
        tmp.write_text("complete artefact")

    results.put(build_once(target, build))


def test_concurrent_builds_of_one_target_build_once(tmp_path):
    target = tmp_path / "models" / "program.so"
    target.parent.mkdir()
    results = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_slow_build, args=(target, results)) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    built = sorted(results.get() for _ in workers)
    assert built == [False, False, True]
    assert target.read_text() == "complete artefact"
    # The artefact and its manifest (size and SHA-256); no temporary files left behind.
    names = sorted(p.name for p in target.parent.iterdir() if not p.name.endswith(".lock"))
    assert names == ["program.so", "program.so.json"]


def _project(folder: Path) -> tuple[Path, Path]:
    """A program that includes a file beside it and one from another folder: (its path, that folder)."""
    (folder / "more").mkdir(parents=True)
    (folder / "prior.stan").write_text("mu ~ normal(1, 2);\n")
    (folder / "more" / "likelihood.stan").write_text("1.5 ~ normal(mu, 1);\n")
    main = folder / "main.stan"
    main.write_text(
        "parameters {\n  real mu;\n}\nmodel {\n  #include prior.stan\n  #include likelihood.stan\n}\n"
    )
    return main, folder / "more"


def test_an_include_is_found_beside_the_program_then_in_the_include_paths(tmp_path):
    # stanc alone, no build: stanc searched no folder ("Current include paths: None"), not even the program's.
    main, more = _project(tmp_path)
    searched = rf"Include paths searched: {re.escape(str(tmp_path.resolve()))} \(the program's own folder"
    with pytest.raises(StanCompileError, match=rf"(?s)'likelihood.stan' in specified include.*{searched}"):
        read_program(main)
    code = read_program(main, [more])[0]
    assert "mu ~ normal(1, 2);" in code and "1.5 ~ normal(mu, 1);" in code and "#include" not in code
    assert list(Program.of(main, more).info["parameters"]) == ["mu"]  # one folder, or a list
    with pytest.raises(FileNotFoundError, match="include path .*nowhere' is not a folder"):
        read_program(main, [tmp_path / "nowhere"])


def test_the_translation_holds_the_included_files_so_an_edit_changes_the_cache_key(tmp_path):
    # The C++ is the build's cache key: an edited included file is a new build, a moved project is not.
    main, more = _project(tmp_path / "a" / "project")
    cpp = translate(main, [more])[3]
    (main.parent / "prior.stan").write_text("mu ~ normal(1, 3);\n")
    edited = translate(main, [more])[3]
    assert edited != cpp
    moved = shutil.copytree(main.parent, tmp_path / "b" / "project")
    assert translate(moved / "main.stan", [moved / "more"])[3] == edited
    assert "--include-paths" not in translate(program_path("mvn_mean"))[3]  # others' keys are as before


def test_the_command_line_takes_include_paths_and_names_a_missing_include(tmp_path, capsys):
    main, more = _project(tmp_path)
    for command in ("sample", "nuts", "compile"):
        args = build_parser().parse_args(
            [command, str(main), "--include-path", str(more), "--include-path", "x"]
        )
        assert args.include_path == [str(more), "x"]
    for command in ("sample", "nuts", "compile"):  # refused before any build
        assert cli_main([command, str(main), "-q"] if command != "compile" else [command, str(main)]) != 0
        assert "Could not find include file 'likelihood.stan'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_program_with_includes_compiles_and_samples(tmp_path_factory, capsys):
    # One build (a two-line program), found in the cache on later runs: the folder keeps its name.
    main, more = _project(tmp_path_factory.mktemp("include"))
    assert cli_main(["compile", str(main), "--include-path", str(more)]) == 0, capsys.readouterr().err
    result = sample(main, None, "nuts", {"draws": 1000}, include_paths=[more], progress=False, seed=2)
    # prior N(1, 2^2) and one observation 1.5 ~ N(mu, 1): N(1.4, 0.8)
    draws = result.to_inference_data().posterior["mu"].values
    assert draws.mean() == pytest.approx(1.4, abs=0.1) and draws.std() == pytest.approx(0.894, rel=0.1)
