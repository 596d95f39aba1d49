"""The correctness matrix (tests/sampling/matrix.py) for the autoencoder methods: every warm-up."""

import pytest

from tests.sampling.matrix import cases, check_case, matrix_files  # noqa: F401 (a fixture)

CASES = cases(latent=True)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
@pytest.mark.slow
def test_the_combination_is_exact_or_refused(matrix_files, case):  # noqa: F811
    check_case(case, matrix_files)
