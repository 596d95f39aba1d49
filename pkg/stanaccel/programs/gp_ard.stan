// Gaussian-process regression hyperparameters, squared-exponential ARD kernel.
//
// Tempering by subsampling (Dougal et al.), GP experiments: y ~ N(0, K + sigma_n^2 I)
// with K_ij = sigma_f^2 exp(-sum_d (x_id - x_jd)^2 / (2 ell_d^2)). Priors as in the
// paper: ell_d ~ LogNormal(mu0 = 0.5, sigma0 = 1), sigma_f ~ Gamma(4, 1),
// sigma_n ~ Gamma(2, 2) (shape and rate, Stan's convention; the paper does not
// say which). `beta` multiplies the log likelihood: in [0, 1] for power
// tempering (beta = 0 skips the likelihood, so the prior alone is cheap), above
// 1 for a data subset scaled up to the full data's weight (stanaccel.approx).
// A data subset is a new instance with smaller N. Cheap low-rank approximation:
// gp_ard_lowrank.stan. Data generator: stanaccel.datasets.gp_ard.
data {
  int<lower=1> N;
  int<lower=1> D;
  array[N] vector[D] x;
  vector[N] y;
  real<lower=0> beta;
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
    matrix[N, N] K = add_diag(gp_exp_quad_cov(x, sigma_f, to_array_1d(ell)), square(sigma_n));
    target += beta * multi_normal_cholesky_lupdf(y | rep_vector(0, N), cholesky_decompose(K));
  }
}
