// The sigmoidal GP density model p(x) = sigma(g(x)) pi(x) / Z, g ~ GP(mu0, k), as a Stan baseline.
//
// An approximation of the model: the normalising integral Z = E_pi[sigma(g)] is replaced by its
// average over R fixed points x_r = base_mean + base_chol * eps_r (eps_r standard normal, given as
// data, so the points move with the learned base measure), and g is represented only at the data,
// at those R points and at G output points. The error of the Monte Carlo normaliser shrinks as
// 1/sqrt(R). Kernel: squared exponential with one lengthscale per dimension.
// Hyperpriors as the Gibbs sampler's (stanaccel.gpdensity.gibbs): log amplitude ~ N(0, 1.5^2),
// log lengthscale_d ~ N(log scale_d, 1.5^2), mu0 ~ N(0, mu0_sd^2); flat on the base measure.
// Status (work in progress): with these priors NUTS degenerates (amplitude grows, step size
// collapses): a finite normaliser sample lets g rise at the data and fall at the R points. A
// lengthscale prior that keeps g smooth on the scale of the points is the next thing to try.
data {
  int<lower=1> N;
  int<lower=1> D;
  array[N] vector[D] x;
  int<lower=1> R;
  array[R] vector[D] eps;
  int<lower=0> G;
  array[G] vector[D] grid;
  vector<lower=0>[D] scale;
  real<lower=0> mu0_sd;
}
transformed data {
  int P = N + R + G;
}
parameters {
  real mu0;
  real<lower=0> amplitude;
  array[D] real<lower=0> lengthscale;
  vector[D] base_mean;
  cholesky_factor_cov[D] base_chol;
  vector[P] g_raw;
}
transformed parameters {
  vector[P] g;
  {
    array[P] vector[D] points;
    points[1:N] = x;
    for (r in 1:R) {
      points[N + r] = base_mean + base_chol * eps[r];
    }
    if (G > 0) {
      points[(N + R + 1):P] = grid;
    }
    matrix[P, P] K = add_diag(gp_exp_quad_cov(points, amplitude, lengthscale), 1e-6 * square(amplitude));
    g = mu0 + cholesky_decompose(K) * g_raw;
  }
}
model {
  g_raw ~ std_normal();
  amplitude ~ lognormal(0, 1.5);
  lengthscale ~ lognormal(log(scale), 1.5);
  mu0 ~ normal(0, mu0_sd);
  target += sum(log_inv_logit(g[1:N]));
  target += multi_normal_cholesky_lpdf(x | base_mean, base_chol);
  target += -N * log_sum_exp(log_inv_logit(g[(N + 1):(N + R)])) + N * log(R);
}
generated quantities {
  vector[G] density;
  {
    real log_z = log_sum_exp(log_inv_logit(g[(N + 1):(N + R)])) - log(R);
    for (i in 1:G) {
      density[i] = exp(log_inv_logit(g[N + R + i]) + multi_normal_cholesky_lpdf(grid[i] | base_mean, base_chol)
                       - log_z);
    }
  }
}
