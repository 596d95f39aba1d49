// Low-rank approximations of gp_ard.stan's likelihood with M inducing inputs z:
// the subset-of-regressors (Nystrom) covariance Q = K_nm K_mm^-1 K_mn + sigma_n^2 I
// (fitc = 0), or FITC (fitc = 1), which restores the exact diagonal:
// Q + diag(K_nn - Q_nn). Same parameters, priors and `beta` as gp_ard.stan, so
// both define densities on one unconstrained space and either can stand in for
// the other (stanaccel.approx.low_rank). The likelihood is evaluated by the
// Woodbury identity in O(N M^2) rather than O(N^3), and with its constant
// -N/2 log(2 pi), so its values are on the exact program's scale.
data {
  int<lower=1> N;
  int<lower=1> D;
  array[N] vector[D] x;
  vector[N] y;
  real<lower=0> beta;
  int<lower=1> M;
  array[M] vector[D] z;
  int<lower=0, upper=1> fitc;
}
parameters {
  vector<lower=0>[D] ell;
  real<lower=0> sigma_f;
  real<lower=0> sigma_n;
}
model {
  ell ~ lognormal(0.5, 1);
  sigma_f ~ gamma(4, 1);
  sigma_n ~ gamma(2, 2);
  if (beta > 0) {
    array[D] real ell_array = to_array_1d(ell);
    // A jitter relative to the signal variance keeps K_mm positive definite.
    matrix[M, M] L_mm = cholesky_decompose(add_diag(gp_exp_quad_cov(z, sigma_f, ell_array),
                                                    1e-6 * square(sigma_f)));
    matrix[M, N] V = mdivide_left_tri_low(L_mm, gp_exp_quad_cov(z, x, sigma_f, ell_array));
    vector[N] lambda = rep_vector(square(sigma_n), N);
    if (fitc == 1) {
      lambda += fmax(square(sigma_f) - columns_dot_self(V)', 0);
    }
    vector[N] inv_sqrt_lambda = inv_sqrt(lambda);
    matrix[M, N] W = diag_post_multiply(V, inv_sqrt_lambda);
    matrix[M, M] L_a = cholesky_decompose(add_diag(tcrossprod(W), 1));
    vector[N] r = y .* inv_sqrt_lambda;
    vector[M] c = mdivide_left_tri_low(L_a, W * r);
    real log_det = sum(log(lambda)) + 2 * sum(log(diagonal(L_a)));
    target += beta * -0.5 * (log_det + dot_self(r) - dot_self(c) + N * log(2 * pi()));
  }
}
