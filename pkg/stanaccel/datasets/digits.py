"""The UCI optical recognition of handwritten digits, first two classes, for ``stan/logistic.stan``.

The Deep MCMC paper fits Bayesian logistic regression to the first two
groups (digits 0 and 1) of this data set. scikit-learn ships it
(``sklearn.datasets.load_digits``: 8x8 images, 64 pixel counts 0-16), so it
needs no download. Pixels that are constant over the training images are
dropped (their weights would be informed by the prior alone) and the rest
are standardised with the training mean and sd; the paper does not say how
it preprocessed. A stratified held-out test set goes to ``truth``.
The paper's other real data sets (CNAE-9 from UCI, MNIST) need a download,
which this package does not do.
"""

from __future__ import annotations

import numpy as np

from stanaccel.datasets import Dataset


def generate(
    classes: tuple[int, int] = (0, 1),
    test_fraction: float = 0.25,
    seed: int = 0,
    prior_scale: float = 1.0,
    beta: float = 1.0,
) -> Dataset:
    """Logistic-regression data: y = 1 for the second class; a seeded stratified train/test split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if len(set(classes)) != 2 or not all(0 <= c <= 9 for c in classes):
        raise ValueError(f"classes must be two different digits 0-9, not {classes}")
    images, labels = load_digits(return_X_y=True)
    keep = np.isin(labels, classes)
    X, y = images[keep], (labels[keep] == classes[1]).astype(int)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    varying = X_train.std(axis=0) > 0
    mean, sd = X_train[:, varying].mean(axis=0), X_train[:, varying].std(axis=0)
    X_train = (X_train[:, varying] - mean) / sd
    X_test = (X_test[:, varying] - mean) / sd
    data = {"N": len(y_train), "K": int(varying.sum()), "X": X_train, "y": y_train,
            "prior_scale": prior_scale, "beta": beta}  # fmt: skip
    truth = {"X_test": X_test, "y_test": y_test, "pixels": np.flatnonzero(varying)}
    return Dataset("logistic", data, truth)
