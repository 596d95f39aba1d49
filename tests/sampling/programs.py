"""Stan programs written for these tests (none of them bundled), and their exact posteriors."""

import numpy as np

# Linear regression with known noise: a Gaussian posterior known in closed form.
# `beta` multiplies the likelihood, so the program is temperable.
REGRESSION = """
data {
  int<lower=2> N;
  vector[N] x;
  vector[N] y;
  real<lower=0> sigma;
  real<lower=0> beta;
}
parameters {
  vector[2] coef;
}
model {
  coef ~ normal(0, 2);
  target += beta * normal_lpdf(y | coef[1] + coef[2] * x, sigma);
}
"""

# The same model written without beta: not temperable.
NO_BETA = """
data {
  int<lower=2> N;
  vector[N] x;
  vector[N] y;
  real<lower=0> sigma;
}
parameters {
  vector[2] coef;
}
model {
  coef ~ normal(0, 2);
  y ~ normal(coef[1] + coef[2] * x, sigma);
}
"""

# Parameters named and shaped differently: no approximation of REGRESSION.
OTHER_PARAMETERS = """
data {
  int<lower=2> N;
  vector[N] x;
  vector[N] y;
  real<lower=0> sigma;
}
parameters {
  real a;
  real b;
}
model {
  y ~ normal(a + b * x, sigma);
}
"""

# REGRESSION on the latent space of a decoder whose weights are data (for latent-nuts).
REGRESSION_LATENT = """
data {
  int<lower=2> N;
  vector[N] x;
  vector[N] y;
  real<lower=0> sigma;
  real<lower=0> beta;
  int<lower=1> latent_dim;
  int<lower=1> hidden;
  matrix[hidden, latent_dim] W1;
  vector[hidden] b1;
  int<lower=0, upper=1> hidden_tanh;
  matrix[2, hidden] W2;
  vector[2] b2;
  vector[2] location;
  vector<lower=0>[2] scale;
}
parameters {
  vector[latent_dim] z;
}
model {
  vector[hidden] h = W1 * z + b1;
  if (hidden_tanh) {
    h = tanh(h);
  }
  vector[2] coef = location + scale .* (W2 * h + b2);
  coef ~ normal(0, 2);
  target += beta * normal_lpdf(y | coef[1] + coef[2] * x, sigma);
}
"""


def regression_data(n: int = 40, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return {"N": n, "x": x, "y": 1 + 0.5 * x + rng.normal(size=n), "sigma": 1.0}


def regression_posterior(data: dict) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of coef: prior N(0, 4 I), likelihood N(X coef, sigma^2 I)."""
    X = np.column_stack([np.ones(data["N"]), data["x"]])
    precision = np.eye(2) / 4 + X.T @ X / data["sigma"] ** 2
    cov = np.linalg.inv(precision)
    return cov @ X.T @ data["y"] / data["sigma"] ** 2, np.sqrt(np.diag(cov))


# REGRESSION with every block a user's program may have: a transformed
# parameter, generated quantities drawn with an _rng, the pointwise `log_lik`
# (for the log_likelihood group and loo), and a generated-quantities reject
# (a draw whose slope is above `reject_above`), to test what each method writes.
QUANTITIES = """
data {
  int<lower=2> N;
  vector[N] x;
  vector[N] y;
  real<lower=0> sigma;
  real<lower=0> beta;
  real reject_above;
}
parameters {
  vector[2] coef;
}
transformed parameters {
  vector[2] u = exp(coef);
}
model {
  coef ~ normal(0, 2);
  target += beta * normal_lpdf(y | coef[1] + coef[2] * x, sigma);
}
generated quantities {
  real y_new = normal_rng(coef[1] + 0.5 * coef[2], sigma);
  vector[N] log_lik;
  for (n in 1:N) {
    log_lik[n] = normal_lpdf(y[n] | coef[1] + coef[2] * x[n], sigma);
  }
  if (coef[2] > reject_above) {
    reject("slope ", coef[2], " above ", reject_above);
  }
}
"""


# Data for the bundled logistic program (its beta unbounded above, so that a subset can be scaled by
# N/m; prior_scale = 0 drops the priors: with collinear columns of X the posterior then has a flat
# direction, a singular Hessian at the mode).
def logistic_data(n: int, k: int = 5, seed: int = 0, correlation: float = 0.5) -> dict:
    """N observations of K predictors with correlation ``correlation`` between each pair, y from logistic."""
    rng = np.random.default_rng(seed)
    cov = np.full((k, k), correlation) + (1 - correlation) * np.eye(k)
    X = rng.normal(size=(n, k)) @ np.linalg.cholesky(cov).T
    w = np.linspace(-1, 1, k)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(0.3 + X @ w)))).astype(int)
    return {"N": n, "K": k, "X": X, "y": y, "prior_scale": 5.0}


# Posteriors a Gaussian does not fit, and two more shapes, in one program (one build for the suite).
# Case 1: Neal's funnel in (a, x), whose scale in x changes by orders of magnitude with a, so no one
# Gaussian covers it (and its mode, at a = -4.5 (K + 1), has curvatures e^(4.5 (K + 1)) apart). Case 2:
# -b^4, flat to second order at its mode b = 0 (the Hessian is singular there). Case 3: independent
# Cauchy, tails far heavier than any Gaussian's. Case 4: b has two equal modes, at -3 and 3 (sd 0.5),
# that one Gaussian cannot both cover. Case 5: a milder funnel (a ~ N(0, 1)), which NUTS samples.
# Case 6: b and x are in no term, so the posterior and its beta = 0 level are improper (no evidence);
# `beta` tempers the likelihood of five fixed observations of a. Case 7: the density is NaN where a < 0
# (sqrt(a), with no lower bound declared), and its Laplace Gaussian (mode 0.25, sd 0.5) puts 31% of its
# draws there. Case 8: s has no prior (and no data), so the density of log s (with the Jacobian)
# increases without bound: improper, and L-BFGS runs off. Case 9: a moving-average recursion over 200
# terms, as posteriordb's arma11 has: from a start with |b| > 1 it overflows (e grows as b^200), and
# L-BFGS's line search fails there; from the origin it finds the mode. In the cases but 8,
# s ~ gamma(3, 1) has its mode at s = 2, and the density of log s (with the Jacobian) at s = 3.
POOR_GAUSSIAN = """
data {
  int<lower=1, upper=9> case_;
  int<lower=0> K;
  real<lower=0> beta;
}
transformed data {
  vector[5] y = [1.2, 0.3, 2.1, 1.7, 0.9]';
}
parameters {
  real a;
  real b;
  real<lower=0> s;
  vector[K] x;
}
model {
  if (case_ != 8) {
    s ~ gamma(3, 1);
  }
  if (case_ == 1) {
    a ~ normal(0, 3);
    b ~ normal(0, 1);
    x ~ normal(0, exp(a / 2));
  } else if (case_ == 2) {
    a ~ normal(1, 1);
    target += -b ^ 4;
    x ~ normal(0, 1);
  } else if (case_ == 3) {
    a ~ cauchy(0, 1);
    b ~ cauchy(0, 1);
    x ~ cauchy(0, 1);
  } else if (case_ == 4) {
    a ~ normal(0, 1);
    target += log_mix(0.5, normal_lpdf(b | -3, 0.5), normal_lpdf(b | 3, 0.5));
    x ~ normal(0, 1);
  } else if (case_ == 5) {
    a ~ normal(0, 1);
    b ~ normal(0, 1);
    x ~ normal(0, exp(a / 2));
  } else if (case_ == 6) {
    a ~ normal(0, 1);
    target += beta * normal_lpdf(y | a, 1);
  } else if (case_ == 7) {
    target += -2 * square(sqrt(a) - 0.5);
    b ~ normal(0, 1);
    x ~ normal(0, 1);
  } else if (case_ == 9) {
    real e = 0;
    a ~ normal(0, 1);
    b ~ normal(0, 2);
    x ~ normal(0, 1);
    for (t in 1:200) {
      e = y[1 + t % 5] - a - b * e;
      target += normal_lpdf(e | 0, s);
    }
  } else {
    a ~ normal(0, 1);
    b ~ normal(0, 1);
    x ~ normal(0, 1);
  }
}
"""


# Two modes 12 sd apart (means -3 and 3 on the first axis, sd 0.5), weights 0.35 and 0.65, under a
# N(0, 5^2 I) prior that shifts neither weight (it is symmetric); `beta` tempers the mixture.
# Evidence in closed form: int N(t | 0, 25 I) N(t | m, 0.25 I) dt = N(m | 0, 25.25 I) for either
# mean m, so Z = N((3, 0) | 0, 25.25 I).
BIMODAL = """
data {
  real<lower=0> beta;
}
parameters {
  vector[2] theta;
}
model {
  theta ~ normal(0, 5);
  target += beta * log_mix(0.35, normal_lpdf(theta | [-3, 0]', 0.5), normal_lpdf(theta | [3, 0]', 0.5));
}
"""
BIMODAL_RIGHT = 0.65
BIMODAL_LOG_EVIDENCE = float(-np.log(2 * np.pi * 25.25) - 9 / (2 * 25.25))
