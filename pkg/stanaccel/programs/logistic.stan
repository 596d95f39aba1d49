// Bayesian logistic regression with Gaussian priors.
//
// y_n ~ Bernoulli(logit^-1(alpha + X_n w)), alpha ~ N(0, prior_scale^2),
// w_k ~ N(0, prior_scale^2). The model of the autoencoder-HMC experiments
// (Deep MCMC). `beta` multiplies the log likelihood: in [0, 1] it tempers it
// (beta = 0 skips it); above 1 a subset of the observations stands for all
// of them, as the subset and control-variate approximations set it (N/m).
// prior_scale = 0 drops the priors (flat). Data generator:
// stanaccel.datasets.logistic.
data {
  int<lower=0> N;
  int<lower=1> K;
  matrix[N, K] X;
  array[N] int<lower=0, upper=1> y;
  real<lower=0> prior_scale;
  real<lower=0> beta;
}
parameters {
  real alpha;
  vector[K] w;
}
model {
  if (prior_scale > 0) {
    alpha ~ normal(0, prior_scale);
    w ~ normal(0, prior_scale);
  }
  if (beta > 0) {
    target += beta * bernoulli_logit_glm_lupmf(y | X, alpha, w);
  }
}
