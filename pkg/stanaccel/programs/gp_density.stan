// The sigmoidal GP density model p(x) = sigma(g(x)) pi(x) / Z, Z = E_pi[sigma(g)], g ~ GP(mu0, k),
// as a Stan baseline. Data from stanaccel.gpdensity.stan_baseline.stan_data.
//
// This is an APPROXIMATION of the model, in two ways:
// 1. Sparse g (a predictive process): g is a random variable only at L fixed inducing points
//    (g_s = mu0 + chol(K_s) g_raw, non-centred); everywhere else g is the GP's conditional mean
//    given g_s, g(x) = mu0 + k_s(x)' K_s^-1 (g_s - mu0), at the data, the normaliser points and the
//    output points alike. The fitted g is a combination of L kernel functions.
// 2. A Monte Carlo normaliser with R fixed points: R_base points x_r = base_mean + base_chol * eps_r
//    (eps_r standard normal, given as data, so they move with the learned base measure) and R_fixed
//    points drawn once from a fixed Gaussian q0 that covers the data (the data's mean, covariance
//    inflated). Z is their importance-weighted average of sigma(g), with the balance-heuristic
//    weights pi(x) / q(x), q = (R_base pi + R_fixed q0) / R (at most R / R_base):
//    log Z = log_sum_exp(log w_r + log sigma(g(x_r))) - log R. With R_fixed = 0 the weights are 1.
//    stan_data draws both sets as quasi-random points by default (a scrambled Halton sequence through
//    the normal quantile function). The error shrinks as 1/sqrt(R) or faster; the points being
//    fixed, it is the same function of the parameters in every draw, and it is not benign: the
//    likelihood rewards parameters where Z is underestimated (by N times the log error), so the
//    sampler seeks them out. Quasi-random points keep that small (1-D mixture, N = 150, R = 300:
//    the fitted density integrated to 1.17 with pseudo-random points, to 1.007 with quasi-random).
// Why g is not free at the sample: an earlier version gave g its own value at every datum and
// normaliser point; with a finite normaliser sample that likelihood is unbounded (g rises at the
// data and falls at the R points), and NUTS degenerated on a 100-point 1-D mixture (amplitude about
// 3e4, step size 1e-4, divergences, non-finite densities).
// Why the fixed points: with only points that move with the base (R_fixed = 0) the posterior is
// still improper. The base can shrink until part of the data lies beyond every normaliser point,
// where g is then unconstrained by Z: g rises there and falls at all R points, the amplitude runs
// away (seen: amplitude > 1e3, log Z < -1000 on a 150-point 1-D mixture). Points fixed around the
// data keep every datum inside the normaliser sample whatever the base does.
// Kernel: squared exponential, amplitude and one lengthscale per dimension, jitter 1e-6 amplitude^2
// (as stanaccel.gpdensity.covariance). Hyperpriors as the Gibbs sampler's (stanaccel.gpdensity.gibbs):
// log amplitude ~ N(0, 1.5^2), log lengthscale_d ~ N(log scale_d, 1.5^2), mu0 ~ N(0, mu0_sd^2), flat
// on the base measure's mean and log-Cholesky factor.
// Cost per gradient: O((N + R) L D + R D^2 + L^3); the G output points enter generated quantities only.
functions {
  // g at points: mu0 + k_s(x)' alpha, alpha = K_s^-1 (g_s - mu0)
  vector g_at(array[] vector points, array[] vector inducing, real mu0, real amplitude,
              array[] real lengthscale, vector alpha) {
    return mu0 + gp_exp_quad_cov(points, inducing, amplitude, lengthscale) * alpha;
  }

  // log Z: the importance-weighted Monte Carlo average of sigma(g) over the normaliser points
  real log_normaliser(array[] vector eps, array[] vector fixed_points, vector log_q0_fixed, vector q0_mean,
                      matrix q0_chol, vector base_mean, matrix base_chol, array[] vector inducing,
                      real mu0, real amplitude, array[] real lengthscale, vector alpha) {
    int R_base = size(eps);
    int R_fixed = size(fixed_points);
    int R = R_base + R_fixed;
    array[R] vector[rows(base_mean)] points;
    vector[R] log_q0;
    vector[R] log_pi;
    for (r in 1:R_base) {
      points[r] = base_mean + base_chol * eps[r];
      log_q0[r] = R_fixed > 0 ? multi_normal_cholesky_lpdf(points[r] | q0_mean, q0_chol) : 0;
    }
    for (r in 1:R_fixed) {
      points[R_base + r] = fixed_points[r];
      log_q0[R_base + r] = log_q0_fixed[r];
    }
    vector[R] log_weight = rep_vector(0, R);
    if (R_fixed > 0) {
      for (r in 1:R) {
        log_pi[r] = multi_normal_cholesky_lpdf(points[r] | base_mean, base_chol);
        log_weight[r] = log_pi[r] - log_sum_exp(log(R_base) - log(R) + log_pi[r],
                                                log(R_fixed) - log(R) + log_q0[r]);
      }
    }
    vector[R] g = g_at(points, inducing, mu0, amplitude, lengthscale, alpha);
    return log_sum_exp(log_weight + log_inv_logit(g)) - log(R);
  }
}
data {
  int<lower=1> N;
  int<lower=1> D;
  array[N] vector[D] x;
  int<lower=2> L;
  array[L] vector[D] inducing;
  int<lower=0> R_base;
  array[R_base] vector[D] eps;
  int<lower=0> R_fixed;
  array[R_fixed] vector[D] fixed_points;
  vector[D] q0_mean;
  cholesky_factor_cov[D] q0_chol;
  int<lower=0> G;
  array[G] vector[D] at;
  vector<lower=0>[D] scale;
  real<lower=0> mu0_sd;
}
transformed data {
  if (R_base + R_fixed < 1) {
    reject("need at least one normaliser point, R_base + R_fixed = ", R_base + R_fixed);
  }
  vector[R_fixed] log_q0_fixed;
  for (r in 1:R_fixed) {
    log_q0_fixed[r] = multi_normal_cholesky_lpdf(fixed_points[r] | q0_mean, q0_chol);
  }
}
parameters {
  real mu0;
  real<lower=0> amplitude;
  array[D] real<lower=0> lengthscale;
  vector[D] base_mean;
  cholesky_factor_cov[D] base_chol;
  vector[L] g_raw;
}
transformed parameters {
  // g at the inducing points, and alpha = K_s^-1 (g_s - mu0) = K_chol^-T g_raw
  vector[L] g_inducing;
  vector[L] alpha;
  {
    matrix[L, L] K_chol = cholesky_decompose(add_diag(gp_exp_quad_cov(inducing, amplitude, lengthscale),
                                                      1e-6 * square(amplitude)));
    g_inducing = mu0 + K_chol * g_raw;
    alpha = mdivide_right_tri_low(g_raw', K_chol)';
  }
}
model {
  g_raw ~ std_normal();
  amplitude ~ lognormal(0, 1.5);
  lengthscale ~ lognormal(log(scale), 1.5);
  mu0 ~ normal(0, mu0_sd);
  // flat on log(diagonal(base_chol)): cancel the Jacobian Stan adds for the log transform
  target += -sum(log(diagonal(base_chol)));

  target += sum(log_inv_logit(g_at(x, inducing, mu0, amplitude, lengthscale, alpha)));
  target += multi_normal_cholesky_lpdf(x | base_mean, base_chol);
  target += -N * log_normaliser(eps, fixed_points, log_q0_fixed, q0_mean, q0_chol, base_mean, base_chol,
                                inducing, mu0, amplitude, lengthscale, alpha);
}
generated quantities {
  // log Z as estimated from the normaliser points, and log p(x) at the G output points
  real log_z = log_normaliser(eps, fixed_points, log_q0_fixed, q0_mean, q0_chol, base_mean, base_chol,
                              inducing, mu0, amplitude, lengthscale, alpha);
  vector[G] log_density;
  if (G > 0) {
    vector[G] g = g_at(at, inducing, mu0, amplitude, lengthscale, alpha);
    for (i in 1:G) {
      log_density[i] = log_inv_logit(g[i]) + multi_normal_cholesky_lpdf(at[i] | base_mean, base_chol) - log_z;
    }
  }
}
