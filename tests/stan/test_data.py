"""Data files and the cache folder a user gets wrong: each refused with a message naming the file, the
variable or the limit (the Stan programs' side is in test_errors.py)."""

import json

import pytest

from stanaccel.stan import read_data
from stanaccel.stan.cache import cache_dir
from stanaccel.stan.data import data_error, data_to_json, run_error
from stanaccel.stan.errors import StanDataError, StanEvaluationError, StanMemoryError

# Stan's own messages (stanc 2.36, GCC's libstdc++) when a size set by the data exhausts the memory:
# in the transformed data block, `matrix[N, N] big = rep_matrix(0, N, N);` with N = 200000, and in
# a NUTS chain, a local `matrix[M, M]` of the model block.
BAD_ALLOC_IN_DATA = (
    "Exception: std::bad_alloc (in 'huge.stan', line 2, column 19 to column 58) [origin: bad_alloc]"
)
BAD_ALLOC_IN_CHAIN = (
    "Exception: std::bad_alloc (in 'huge.stan', line 4, column 18 to column 19) [origin: bad_alloc]"
)


def test_a_name_given_twice_is_refused_naming_it_and_the_file(tmp_path):
    path = tmp_path / "twice.json"
    path.write_text('{"N": 3, "y": [1.0, 2.0, 3.0], "N": 4}')
    with pytest.raises(ValueError, match=r"data file .*twice.json: 'N' is given twice; Stan refuses"):
        read_data(path)


def test_a_folder_given_as_data_is_called_a_folder(tmp_path):
    for read in (read_data, data_to_json):
        with pytest.raises(IsADirectoryError, match=rf"Stan data file {tmp_path} is a folder: give the JSON"):
            read(tmp_path)


def test_a_data_file_that_is_not_utf8_names_the_byte(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes('{"N": 3, "name": "café"}'.encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.json: not UTF-8 text \(byte 0xe9 at offset 21"):
        read_data(path)


def test_a_data_file_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"N": 3}).encode())  # as Windows Notepad saves it
    assert read_data(path) == {"N": 3}


def test_a_cache_path_that_is_a_file_is_named(tmp_path, monkeypatch):
    file = tmp_path / "cache"
    file.write_text("")
    for path, culprit in [(file, "it"), (file / "sub", str(file))]:
        monkeypatch.setenv("STANACCEL_CACHE", str(path))
        with pytest.raises(NotADirectoryError) as error:
            cache_dir()
        assert str(error.value) == (
            f"$STANACCEL_CACHE = {path}: {culprit} is a file, not a folder; set $STANACCEL_CACHE to a folder "
            "(created if missing) for the compiled Stan programs"
        )


def test_running_out_of_memory_names_the_stage_the_line_and_the_sizes():
    error = data_error(BAD_ALLOC_IN_DATA, {"N": 200000, "M": 1}, "", "huge")
    assert isinstance(error, StanMemoryError) and isinstance(error, MemoryError)
    assert str(error).startswith(
        "huge ran out of memory while reading its data and running its transformed data block (in "
        "'huge.stan', line 2, column 19 to column 58): it needs more memory than this machine has available; "
        "the data's int values: N = 200000, M = 1."
    )
    error = run_error("NUTS chain 0", BAD_ALLOC_IN_CHAIN, "", '{"N": 1, "M": 200000}', "huge")
    assert isinstance(error, StanMemoryError)
    assert str(error).startswith("huge ran out of memory while running NUTS chain 0 (in 'huge.stan', line 4")
    assert "M = 200000" in str(error)


def test_other_failures_keep_stans_message():
    error = data_error("Exception: normal: no such thing", {}, "{}", "huge")
    assert type(error) is StanDataError and str(error) == "Exception: normal: no such thing"
    error = run_error("NUTS chain 1", "Initialization failed.", "Rejecting initial value:", '{"y": 1.5}', "p")
    assert type(error) is StanEvaluationError
    assert str(error) == "NUTS chain 1 failed: Initialization failed.\nRejecting initial value:"
