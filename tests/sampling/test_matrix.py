"""The correctness matrix (tests/sampling/matrix.py) for the methods that move on the posterior itself:
every warm-up, every inner kernel of the tempering methods, and the refusals."""

import pytest

from tests.sampling.matrix import cases, check_case, matrix_files  # noqa: F401 (a fixture)

CASES = cases(latent=False, approximations=False)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
@pytest.mark.slow
def test_the_combination_is_exact_or_refused(matrix_files, case):  # noqa: F811
    check_case(case, matrix_files)
