// Multivariate-normal mean with known covariance and a conjugate prior.
//
// Tempering by subsampling (Dougal et al.), multivariate-normal experiments:
// N observations x_n ~ N(theta, Sigma) in D dimensions, Sigma known, prior
// theta ~ N(mu0, Sigma0). The posterior is Gaussian and known exactly
// (stanaccel.datasets.mvn_mean.exact_posterior), which makes this the
// program that checks samplers. `beta` in [0, 1] multiplies the log
// likelihood (power tempering; beta = 0 skips it); beta = 1 is the posterior.
data {
  int<lower=1> D;
  int<lower=0> N;
  array[N] vector[D] x;
  vector[D] mu0;
  cov_matrix[D] Sigma0;
  cov_matrix[D] Sigma;
  real<lower=0, upper=1> beta;
}
transformed data {
  matrix[D, D] L0 = cholesky_decompose(Sigma0);
  matrix[D, D] L = cholesky_decompose(Sigma);
}
parameters {
  vector[D] theta;
}
model {
  theta ~ multi_normal_cholesky(mu0, L0);
  if (beta > 0) {
    target += beta * multi_normal_cholesky_lupdf(x | theta, L);
  }
}
