"""Compiling and caching Stan programs."""

import multiprocessing
import time

import pytest

from stanaccel.programs import program_path
from stanaccel.sampling.program import Program
from stanaccel.stan import StanCompileError, compile_program
from stanaccel.stan.cache import build_once, content_hash


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
