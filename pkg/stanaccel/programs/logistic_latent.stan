// Bayesian logistic regression (stan/logistic.stan) with its parameters
// decoded from latent variables by a trained autoencoder's decoder:
//   theta = location + scale .* (W2 * act(W1 * z + b1) + b2),  act = tanh or identity,
//   theta = (alpha, w). The Deep MCMC paper's route: the decoder's weights are data,
// so one Stan call gives the latent potential -log pi(decode(z)) and its gradient.
// A linear decoder is W1 = identity, b1 = 0, hidden_tanh = 0.
// Data builder: stanaccel.latent.decoder_data.
data {
  int<lower=0> N;
  int<lower=1> K;
  matrix[N, K] X;
  array[N] int<lower=0, upper=1> y;
  real<lower=0> prior_scale;
  int<lower=1> latent_dim;
  int<lower=1> hidden;
  matrix[hidden, latent_dim] W1;
  vector[hidden] b1;
  int<lower=0, upper=1> hidden_tanh;
  matrix[K + 1, hidden] W2;
  vector[K + 1] b2;
  vector[K + 1] location;
  vector<lower=0>[K + 1] scale;
}
parameters {
  vector[latent_dim] z;
}
model {
  vector[hidden] h = W1 * z + b1;
  if (hidden_tanh) {
    h = tanh(h);
  }
  vector[K + 1] theta = location + scale .* (W2 * h + b2);
  theta ~ normal(0, prior_scale);
  target += bernoulli_logit_glm_lupmf(y | X, theta[1], theta[2:(K + 1)]);
}
