"""Noised labels: the server's moments and noise model stay right (Monte Carlo, fixed seeds).

Features and labels are fixed; the replications redraw the phases and the noise (REPS
stacked copies of the clients in one transform). An estimate passes when its mean error
is within 3 standard errors; each negative control is off by more than 10.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from spatialdp.privacy import Simulation
from spatialdp.regression import Modulation, clip_rows, random_directions, transform_clients
from spatialdp.regression.client import ClientReports
from spatialdp.regression.oneshot import centered_moments
from spatialdp.regression.regularization import noise_variances
from spatialdp.regression.server import debiased_label_moment

K, D, REPS = 8, 3, 20_000
BOUND = 3.0
MOD = Modulation(alpha=0.0, lam=1.0, radius=1.5)


@pytest.fixture(scope="module")
def clients() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    X = clip_rows(rng.normal(size=(K, D)), 1.5)
    y = np.clip(X @ np.array([1.0, -0.5, 0.3]) + rng.normal(size=K), -BOUND, BOUND)
    return X, y


def replications(X: np.ndarray, y: np.ndarray, label_rho: float,
                 reps: int = REPS) -> list[ClientReports]:
    """``reps`` independent releases of the same clients ``(X, y)``."""
    k = len(y)
    big = transform_clients(np.tile(X, (reps, 1)), np.tile(y, reps), modulation=MOD,
                            directions=random_directions(D, 1, rng=3), rho=2.0,
                            label_bound=BOUND, label_rho=label_rho, target=Simulation(rng=11))
    return [replace(big, features=big.features[r * k:(r + 1) * k],
                    labels=big.labels[r * k:(r + 1) * k]) for r in range(reps)]


@pytest.fixture(scope="module")
def reports(clients) -> list[ClientReports]:
    return replications(*clients, label_rho=2.0)  # tau = 2B / sqrt(2 rho) = 3


def z_score(samples: np.ndarray, truth: float) -> float:
    return float(abs(samples.mean() - truth) / (samples.std(ddof=1) / math.sqrt(len(samples))))


@pytest.mark.parametrize("centred", [True, False])
def test_label_moment_is_unbiased_once_the_noise_variance_is_removed(clients, reports,
                                                                     centred):
    _, y = clients
    truth = float(np.var(y)) if centred else float(np.mean(y**2))
    est = np.array([debiased_label_moment(r, centred=centred, bounded=False) for r in reports])
    assert z_score(est, truth) < 3.0
    # negative control: removing tau^2 from the centred moment (the former code) is biased
    # by -tau^2 / K (the label mean carries tau^2 / K of the noise)
    if centred:
        tau2 = reports[0].label_sigma ** 2
        former = np.array([np.var(r.labels) - tau2 for r in reports])
        assert z_score(former, truth) > 10.0
        assert abs(former.mean() - (truth - tau2 / K)) < 3.0 * former.std() / math.sqrt(REPS)


def test_bounding_the_label_moment_by_the_public_range_cuts_its_error(clients, reports):
    _, y = clients
    truth = float(np.var(y))
    raw = np.array([debiased_label_moment(r, bounded=False) for r in reports])
    bounded = np.array([debiased_label_moment(r) for r in reports])
    assert bounded.min() >= 0.0
    assert bounded.max() <= BOUND**2
    assert np.mean((bounded - truth) ** 2) < 0.5 * np.mean((raw - truth) ** 2)


def test_the_fit_regularises_with_the_debiased_label_moment(reports):
    # the automatic norm cap is 2 sqrt(Y2 / s): the Y2 it used is the debiased, bounded one
    for rep in reports[:50]:
        reg = centered_moments(rep).reg
        y2 = (reg.norm_cap / 2.0) ** 2 * reg.feature_scale
        assert y2 == pytest.approx(max(debiased_label_moment(rep), 1e-12), rel=1e-9)


def centred_cross(rep: ClientReports) -> np.ndarray:
    """The centred cross moment of one release (alpha = 0), as the fit computes it."""
    G, y = rep.features, rep.labels
    return y @ G / len(y) - y.mean() * G.mean(axis=0)


def test_centred_cross_moment_stays_unbiased_with_noised_labels(clients, reports):
    X, y = clients
    for rep in reports[:5]:  # the fit's own centred b^ is this formula
        np.testing.assert_allclose(centered_moments(rep).b, centred_cross(rep), atol=1e-12)
    truth = (y - y.mean()) @ (X - X.mean(axis=0)) / K
    b = np.array([centred_cross(r) for r in reports])
    se = b.std(axis=0, ddof=1) / math.sqrt(REPS)
    assert np.all(np.abs(b.mean(axis=0) - truth) < 3.0 * se)


def test_noise_model_counts_the_label_noise_in_the_cross_moment(clients):
    # many clients: the per-coordinate variance of b^ follows (Y2 + tau^2)(sigma^2 + a) / K
    X, y = clients
    reps = replications(np.tile(X, (50, 1)), np.tile(y, 50), label_rho=0.5, reps=400)
    k = 50 * K
    b = np.array([r.labels @ r.features / k for r in reps])
    _, v_b = noise_variances(k, D, sigma=reps[0].sigma, alpha=0.0, lam=MOD.lam,
                             feature_scale=float(np.sum(X**2)) / (K * D),
                             label_second_moment=float(np.mean(y**2)),
                             label_sigma=reps[0].label_sigma)
    measured = b.var(axis=0, ddof=1).mean()
    # 400 replications x 3 coordinates: relative SE of the variance about 4%
    assert abs(measured / v_b - 1) < 0.15
    public = noise_variances(k, D, sigma=reps[0].sigma, alpha=0.0, lam=MOD.lam,
                             feature_scale=float(np.sum(X**2)) / (K * D),
                             label_second_moment=float(np.mean(y**2)))[1]
    assert measured / public > 2.0  # ignoring the label noise would understate it
