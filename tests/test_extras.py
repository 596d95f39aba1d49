"""Without the `latent` extra (TensorFlow unimportable) the latent methods name it; the rest runs."""

import json
import subprocess
import sys

import pytest

from stanaccel.extras import LATENT_INSTALL

# TensorFlow made unimportable before anything imports it: a real import failure
# (``import tensorflow`` raises ModuleNotFoundError), as in an install without the extra.
SCRIPT = """
import sys
sys.modules["tensorflow"] = None
from pathlib import Path

import stanaccel
from stanaccel.extras import MissingExtraError
from stanaccel.sampling import sample

data, checkpoint = sys.argv[1], Path(sys.argv[2])
short = {"chains": 1, "warmup": 100, "draws": 50}
try:
    sample("mvn_mean", data, "ae-pcn", short, progress=False, checkpoint=checkpoint)
except MissingExtraError as exc:
    print("error:", exc)
assert not checkpoint.exists(), "the warm-up ran before the missing extra was found"
result = sample("mvn_mean", data, "hmc", short, progress=False)
print("hmc draws:", result.num_draws, result.method)
from stanaccel.cli import main
print("cli exit:", main(["sample", "mvn_mean", "--data", data, "--method", "latent-nuts", "--quiet"]))
"""


@pytest.mark.slow
def test_latent_methods_without_tensorflow_name_the_extra(mvn_program, mvn_data, tmp_path):
    data = tmp_path / "mvn.json"
    data.write_text(json.dumps({k: v.tolist() if hasattr(v, "tolist") else v for k, v in mvn_data.items()}))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(data), str(tmp_path / "checkpoint")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "error: method 'ae-pcn' needs tensorflow (the autoencoders)" in done.stdout
    assert LATENT_INSTALL in done.stdout
    assert "hmc draws: 50 hmc" in done.stdout
    assert "cli exit: 2" in done.stdout
    assert "stanaccel sample: error: method 'latent-nuts' needs tensorflow" in done.stderr
    assert LATENT_INSTALL == 'pip install "stanaccel[latent]"'
