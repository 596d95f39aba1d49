// Bayesian logistic regression with Gaussian priors.
//
// y_n ~ Bernoulli(logit^-1(alpha + X_n w)), alpha ~ N(0, prior_scale^2),
// w_k ~ N(0, prior_scale^2). The model of the autoencoder-HMC experiments
// (Deep MCMC). `beta` in [0, 1] multiplies the log likelihood (power
// tempering; beta = 0 skips it). Data generator: stanaccel.datasets.logistic.
data {
  int<lower=0> N;
  int<lower=1> K;
  matrix[N, K] X;
  array[N] int<lower=0, upper=1> y;
  real<lower=0> prior_scale;
  real<lower=0, upper=1> beta;
}
parameters {
  real alpha;
  vector[K] w;
}
model {
  alpha ~ normal(0, prior_scale);
  w ~ normal(0, prior_scale);
  if (beta > 0) {
    target += beta * bernoulli_logit_glm_lupmf(y | X, alpha, w);
  }
}
