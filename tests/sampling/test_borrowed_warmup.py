"""A borrowed warm-up (``warmup_from``, ``--warmup-from``) is checked against the program and data.

Data set A is the regression's; data set B moves every y by 60, so that B's posterior (intercept near
61) is far from A's (near 1), as a user's new data may be.
"""

import warnings

import numpy as np
import pytest

from stanaccel.cli import main
from stanaccel.diagnostics import to_inference_data
from stanaccel.diagnostics.files import save_netcdf
from stanaccel.sampling import ConfigError, sample
from stanaccel.sampling.warmup import READAPTED
from stanaccel.stan import StanModel, write_data
from stanaccel.stan.nuts import BorrowedWarmupWarning, WarmupState, sample_nuts
from stanaccel.stan.provenance import ATTRS, READAPT_ITERATIONS, Provenance
from tests.sampling.programs import OTHER_PARAMETERS, REGRESSION, regression_data, regression_posterior


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("borrowed")
    (folder / "regression.stan").write_text(REGRESSION)
    (folder / "other.stan").write_text(OTHER_PARAMETERS)
    data = regression_data()
    moved = {**data, "y": data["y"] + 60.0}
    write_data(folder / "a.json", {**data, "beta": 1.0})
    write_data(folder / "b.json", {**moved, "beta": 1.0})
    return folder, data, moved


@pytest.fixture(scope="module")
def earlier(files):
    """A NUTS run on data set A, saved as ``stanaccel nuts -o`` saves it: two chains."""
    folder, _, _ = files
    fit = sample_nuts(StanModel(folder / "regression.stan", folder / "a.json"), chains=2, warmup=300,
                      draws=100, seed=3, progress=False)  # fmt: skip
    return save_netcdf(to_inference_data(fit), folder / "a.nc")


def check_posterior(coef: np.ndarray, data: dict) -> None:
    """Draws of coef (n, 2) against the exact posterior: means within 0.3 sd, sds within 25%."""
    mean, sd = regression_posterior(data)
    assert np.all(np.abs(coef.mean(axis=0) - mean) < 0.3 * sd), (coef.mean(axis=0), mean)
    np.testing.assert_allclose(coef.std(axis=0), sd, rtol=0.25)


def test_a_warmup_made_on_other_data_is_adapted_again_before_the_draws_are_kept(files, earlier):
    folder, data, moved = files
    same = StanModel(folder / "regression.stan", {**data, "beta": 1})  # A again, as a dict: the same values
    with warnings.catch_warnings():
        warnings.simplefilter("error", BorrowedWarmupWarning)
        fit = sample_nuts(same, warmup_from=earlier, draws=50, seed=4, progress=False)
    assert fit.warmup_unconstrained.shape[1] == 0  # made on this program and data: continued at once

    other = StanModel(folder / "regression.stan", folder / "b.json")
    with pytest.warns(BorrowedWarmupWarning, match=f"in {earlier} was made on other data than this run's"):
        fit = sample_nuts(other, warmup_from=earlier, draws=500, seed=4, progress=False)
    assert fit.warmup_unconstrained.shape[1] == READAPT_ITERATIONS  # the walk from A's posterior: not kept
    check_posterior(fit.stan_variable("coef"), moved)


def test_sample_with_a_warmup_made_on_other_data_adapts_it_again_and_charges_it(files, earlier, tmp_path):
    folder, _, moved = files
    with pytest.warns(BorrowedWarmupWarning, match="other data.*300 iterations"):
        result = sample(folder / "regression.stan", folder / "b.json", "hmc", {"draws": 500}, seed=5,
                        warmup_from=earlier, progress=False)  # fmt: skip
    assert result.charged_seconds[READAPTED] > 0 and "warmup (borrowed)" in result.charged_seconds
    check_posterior(result.to_inference_data().posterior["coef"].values.reshape(-1, 2), moved)
    # Its file records data set B: a later run on B borrows its warm-up without adapting again.
    state = WarmupState.from_netcdf(result.save(tmp_path / "b.nc"))
    assert state.provenance == Provenance.of(StanModel(folder / "regression.stan", folder / "b.json"))


def test_a_warmup_of_another_program_with_as_many_parameters_is_refused(files, earlier):
    folder, data, _ = files
    other = StanModel(folder / "other.stan", data)
    assert other.dim == 2  # as many as the regression's: counting them cannot tell
    refused = r"made on regression_model, whose parameters are coef.1, coef.2; other_model's are a, b"
    with pytest.raises(ValueError, match=refused):
        sample_nuts(other, warmup_from=earlier, progress=False)
    with pytest.raises(ValueError, match=refused):
        sample(folder / "other.stan", folder / "a.json", "hmc", warmup_from=earlier, progress=False)


def test_a_file_that_records_no_program_and_data_is_adapted_again(files, tmp_path):
    folder, _, _ = files
    model = StanModel(folder / "regression.stan", folder / "a.json")
    groups = sample_nuts(model, chains=2, warmup=200, draws=10, seed=6, progress=False).inference_groups()
    for name in ATTRS.values():  # as an older stanaccel wrote it
        del groups["attrs"][name]
    old = save_netcdf(to_inference_data(groups), tmp_path / "old.nc")
    with pytest.warns(
        BorrowedWarmupWarning, match="records neither its program nor its data.*cannot be checked"
    ):
        fit = sample_nuts(model, warmup_from=old, draws=10, seed=6, progress=False)
    assert fit.warmup_unconstrained.shape[1] == READAPT_ITERATIONS


@pytest.mark.parametrize(
    "arguments, said",
    [
        (
            ["--warmup", "0"],
            "warmup = 0: must be at least 1 NUTS warm-up iteration: the draws start from what",
        ),
        (["--draws", "0"], "--draws: draws = 0: must be at least 1"),
    ],
)
def test_nuts_refuses_no_warmup_or_no_draws_before_reading_or_compiling(tmp_path, capsys, arguments, said):
    program = tmp_path / "never_written.stan"  # nothing is read or compiled before the arguments are checked
    assert main(["nuts", str(program), *arguments, "-q", "-o", str(tmp_path / "x.nc")]) == 2
    err = capsys.readouterr().err
    assert said in err and "never_written" not in err


def test_nuts_warmup_from_takes_at_most_its_chains_and_adapts_again_on_other_data(
    files, earlier, capsys, tmp_path
):
    folder, _, _ = files
    args = ["nuts", str(folder / "regression.stan"), "--warmup-from", str(earlier), "--draws", "20", "-q"]
    assert main([*args, "--data", str(folder / "a.json"), "--chains", "3", "-o", str(tmp_path / "x.nc")]) == 2
    assert f"--chains 3: {earlier} has 2 chains" in capsys.readouterr().err
    assert main([*args, "--data", str(folder / "a.json"), "--chains", "1", "-o", str(tmp_path / "x.nc")]) == 0
    assert "1 chains x (0 warm-up + 20)" in capsys.readouterr().err  # the file's first chain, at once
    assert main([*args, "--data", str(folder / "b.json"), "-o", str(tmp_path / "y.nc")]) == 0
    err = capsys.readouterr().err
    assert f"2 chains x ({READAPT_ITERATIONS} warm-up + 20)" in err
    assert f"BorrowedWarmupWarning: the warm-up in {earlier} was made on other data" in err


def test_a_damaged_warmup_file_is_called_damaged(earlier, tmp_path, capsys):
    cut = tmp_path / "cut.nc"
    cut.write_bytes(earlier.read_bytes()[:3000])  # a copy that stopped
    with pytest.raises(ValueError, match=f"{cut} cannot be read .*truncated file.*damaged"):
        WarmupState.from_netcdf(cut)
    garbage = tmp_path / "garbage.nc"
    garbage.write_text("not netCDF")
    assert main(["nuts", "mvn_mean", "--warmup-from", str(garbage), "-q", "-o", str(tmp_path / "x.nc")]) == 2
    err = capsys.readouterr().err
    assert f"{garbage} cannot be read" in err and "damaged" in err and "older stanaccel" not in err


@pytest.mark.parametrize("method", ["hmc", "nuts"])
def test_sample_refuses_more_chains_than_the_warmup_has_as_nuts_does(files, earlier, method):
    # A kernel method would start chain 3 where chain 1 ended: two chains from one point.
    folder, _, _ = files
    with pytest.raises(ConfigError, match=rf"settings: chains = 3: the warm-up in {earlier} has 2 chains"):
        sample(folder / "regression.stan", folder / "a.json", method, {"chains": 3, "draws": 20},
               warmup_from=earlier, progress=False)  # fmt: skip


def test_sample_takes_fewer_chains_than_the_warmup_has(files, earlier):
    folder, _, _ = files
    result = sample(folder / "regression.stan", folder / "a.json", "hmc", {"chains": 1, "draws": 20},
                    warmup_from=earlier, progress=False)  # fmt: skip
    assert result.config.chains == 1 and result.run.positions.shape[0] == 1


def test_a_folder_given_as_the_warmup_file_is_called_a_folder(files, earlier, tmp_path, capsys):
    folder, _, _ = files
    with pytest.raises(IsADirectoryError, match=f"warm-up file {tmp_path} is a folder: give the netCDF file"):
        WarmupState.from_netcdf(tmp_path)
    args = ["nuts", str(folder / "regression.stan"), "--data", str(folder / "a.json"), "-q"]
    assert main([*args, "--warmup-from", str(tmp_path), "-o", str(tmp_path / "x.nc")]) == 2
    assert f"warm-up file {tmp_path} is a folder" in capsys.readouterr().err
