"""The finite-element solver: convergence, formulations, adjoint derivatives, errors."""

import numpy as np
import pytest
from skfem import Basis, BilinearForm, asm
from skfem.helpers import dot, grad

from stanaccel.pde import SENSORS, EllipticSolver, StiffnessMap, benchmark_solver, plume_source
from stanaccel.pde.mesh import unit_square_basis

# A manufactured solution: p = cos(pi x) cos(pi y) has no flux through the
# boundary and zero boundary mean; u = 0.5 x y is smooth.


def exact_pressure(x, y):
    return np.cos(np.pi * x) * np.cos(np.pi * y)


def manufactured_source(x, y):
    kappa = np.exp(0.5 * x * y)
    px = -np.pi * np.sin(np.pi * x) * np.cos(np.pi * y)
    py = -np.pi * np.cos(np.pi * x) * np.sin(np.pi * y)
    laplacian = -2 * np.pi**2 * exact_pressure(x, y)
    return -(kappa * (0.5 * y * px + 0.5 * x * py) + kappa * laplacian)


def l2_error(n, degree):
    solver = EllipticSolver(n, degree, manufactured_source, SENSORS)
    x, y = solver.nodes
    pressure = solver.solve(0.5 * x * y).pressure
    fine = Basis(solver.basis.mesh, solver.basis.elem, intorder=8)
    error = np.asarray(fine.interpolate(pressure)) - exact_pressure(*np.asarray(fine.global_coordinates()))
    return np.sqrt(np.sum(error**2 * fine.dx))


@pytest.mark.parametrize(("degree", "sizes", "order"), [(1, (8, 16, 32), 2), (2, (4, 8, 16), 3)])
def test_l2_error_converges_at_the_element_order(degree, sizes, order):
    errors = [l2_error(n, degree) for n in sizes]
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(rates - order) < 0.25), (errors, rates)


@pytest.mark.parametrize("degree", [1, 2])
def test_stiffness_map_equals_scikit_fem_assembly(degree):
    basis = unit_square_basis(5, degree)
    stiffness = StiffnessMap(basis)
    x, y = basis.doflocs
    u = np.sin(3 * x) * y

    @BilinearForm
    def form(p, v, w):
        return np.exp(w["u"]) * dot(grad(p), grad(v))

    assembled = asm(form, basis, u=basis.interpolate(u))
    assert abs(stiffness.matrix(stiffness.coefficient(u)) - assembled).max() < 1e-12


def random_field(solver, seed=0):
    x, y = solver.nodes
    rng = np.random.default_rng(seed)
    return np.sin(3 * x + rng.uniform()) * y + 0.3 * rng.standard_normal(solver.dim)


@pytest.mark.parametrize("degree", [1, 2])
def test_pinned_and_bordered_formulations_agree(degree):
    pinned, bordered = benchmark_solver(12, degree), benchmark_solver(12, degree, "bordered")
    u = random_field(pinned)
    a, b = pinned.solve(u), bordered.solve(u)
    scale = np.abs(a.observations).max()
    assert np.abs(a.observations - b.observations).max() < 1e-10 * scale
    assert np.abs(a.pressure - b.pressure).max() < 1e-10 * np.abs(a.pressure).max()
    assert abs(pinned.boundary @ a.pressure) < 1e-12 * np.abs(a.pressure).max()  # zero boundary mean


@pytest.mark.parametrize(("degree", "formulation"), [(1, "pinned"), (2, "pinned"), (1, "bordered")])
def test_adjoint_gradient_of_the_misfit_matches_finite_differences(degree, formulation):
    solver = benchmark_solver(10, degree, formulation)
    u = random_field(solver)
    data = solver.observe(u) + 0.01 * np.random.default_rng(1).standard_normal(len(SENSORS))
    _, gradient = solver.misfit_gradient(u, data, 0.01)
    rng, h = np.random.default_rng(2), 1e-6
    for _ in range(3):
        direction = rng.standard_normal(solver.dim)
        difference = (
            solver.misfit(u + h * direction, data, 0.01) - solver.misfit(u - h * direction, data, 0.01)
        ) / (2 * h)
        assert gradient @ direction == pytest.approx(difference, rel=1e-5)


def test_observation_jacobian_matches_finite_differences():
    solver = benchmark_solver(10, 1)
    u = random_field(solver)
    observations, jacobian = solver.observation_jacobian(u)
    assert jacobian.shape == (len(SENSORS), solver.dim)
    assert np.allclose(observations, solver.observe(u))
    direction, h = np.random.default_rng(3).standard_normal(solver.dim), 1e-6
    difference = (solver.observe(u + h * direction) - solver.observe(u - h * direction)) / (2 * h)
    assert np.allclose(jacobian @ direction, difference, rtol=1e-5, atol=1e-9 * np.abs(difference).max())


def test_observations_interpolate_the_pressure_at_the_sensors():
    solver = EllipticSolver(8, 2, manufactured_source, SENSORS)
    x, y = solver.nodes
    observations = solver.observe(0.5 * x * y)
    assert np.allclose(observations, exact_pressure(*SENSORS.T), atol=2e-3)


@pytest.mark.parametrize("n", [1, 0, -4, 2.5, "40", True, 1000])
def test_bad_mesh_size_is_a_clear_error(n):
    with pytest.raises(ValueError, match="mesh size"):
        EllipticSolver(n, 1, plume_source, SENSORS)


def test_bad_degree_formulation_and_sensors_are_clear_errors():
    with pytest.raises(ValueError, match="degree"):
        EllipticSolver(10, 3, plume_source, SENSORS)
    with pytest.raises(ValueError, match="formulation"):
        EllipticSolver(10, 1, plume_source, SENSORS, "penalty")
    with pytest.raises(ValueError, match="unit square"):
        EllipticSolver(10, 1, plume_source, SENSORS + 1)


def test_field_of_the_wrong_length_is_a_clear_error():
    solver = benchmark_solver(10, 1)
    with pytest.raises(ValueError, match="121 nodal values"):
        solver.observe(np.zeros(120))


def test_an_extreme_field_is_an_arithmetic_error_so_samplers_reject_it():
    from stanaccel.densities import safe_log_density, safe_log_density_gradient
    from stanaccel.pde import elliptic_posterior

    posterior = elliptic_posterior(n=10, degree=1, regime="observations", seed=1)
    solver = posterior.solver
    for u in (np.full(solver.dim, 800.0), np.r_[np.full(solver.dim - 1, -800.0), 0.0]):
        with pytest.raises(FloatingPointError, match="exp\\(u\\)"):
            solver.solve(u)
    xi = np.full(posterior.dim, 1e4)  # exp(u) overflows
    assert safe_log_density(posterior, xi) == -np.inf
    assert safe_log_density_gradient(posterior, xi)[0] == -np.inf
