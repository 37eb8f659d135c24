"""Small-area models against an anchor: the ``milk`` data of R's ``sae`` and its algorithms.

The data (43 small areas, Arora & Lahiri 1997; You & Chapman 2006) are those
shipped as ``data/milk.rda`` in the CRAN package ``sae`` (read from the CRAN
mirror's source, columns ni, yi, SD, MajorArea). The printed figures of
Molina & Marhuenda (The R Journal 7(1), 2015) could not be obtained here, and
``sae`` itself cannot be installed (no CRAN), so the anchor is ``sae``'s own
algorithms, transcribed below line by line from its R sources (``eblupFH.R``,
``mseFH.R``, ``eblupSFH.R``, ``mseSFH.R``): Fisher scoring on dense matrices,
run to a tight tolerance. :mod:`spatialdp.smooth` maximises the likelihood with
a different algorithm (bounded scalar search / L-BFGS-B) and computes the MSE
with its own vectorised formulas, so agreement checks both.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spatialdp._blas import single_blas
from spatialdp.smooth import small_area_estimates
from spatialdp.smooth.fay_herriot import fay_herriot_predict, fit_fay_herriot
from spatialdp.smooth.spatial import SarModel, fit_sar, sar_predict

MILK = (
    "191,1.099,0.163,1;633,1.075,0.08,1;597,1.105,0.083,1;221,0.628,0.109,1;195,0.753,0.119,1;"
    "191,0.981,0.141,1;183,1.257,0.202,1;188,1.095,0.127,2;204,1.405,0.168,2;188,1.356,0.178,2;"
    "149,0.615,0.1,2;290,1.46,0.201,2;250,1.338,0.148,2;194,0.854,0.143,2;184,1.176,0.149,3;"
    "193,1.111,0.145,3;218,1.257,0.135,3;266,1.43,0.172,3;214,1.278,0.137,3;213,1.292,0.163,3;"
    "196,1.002,0.125,3;95,1.183,0.247,3;195,1.044,0.14,3;187,1.267,0.171,3;479,1.193,0.106,3;"
    "230,0.791,0.121,4;186,0.795,0.121,4;199,0.759,0.259,4;238,0.796,0.106,4;207,0.565,0.089,4;"
    "165,0.886,0.225,4;153,0.952,0.205,4;210,0.807,0.119,4;383,0.582,0.067,4;255,0.684,0.106,4;"
    "226,0.787,0.126,4;224,0.44,0.092,4;212,0.759,0.132,4;211,0.77,0.1,4;179,0.8,0.113,4;"
    "312,0.756,0.083,4;241,0.865,0.121,4;205,0.64,0.129,4")


def milk() -> pd.DataFrame:
    rows = [r.split(",") for r in MILK.split(";")]
    frame = pd.DataFrame(rows, columns=["ni", "yi", "SD", "MajorArea"]).astype(
        {"ni": int, "yi": float, "SD": float, "MajorArea": int})
    frame.index = pd.Index([f"a{i + 1}" for i in range(len(frame))], name="region_id")
    return frame


def milk_design(data: pd.DataFrame) -> np.ndarray:
    """``yi ~ as.factor(MajorArea)``: intercept plus three dummies."""
    major = data.MajorArea.to_numpy()
    return np.column_stack([np.ones(len(data))] + [major == k for k in (2, 3, 4)]).astype(float)


def chain_weights(n: int) -> np.ndarray:
    """Areas next to each other in the data's order are neighbours; rows sum to one.

    (``milk`` has no map; a complete graph within each major area would be
    confounded with the major-area effects, and sae's Fisher scoring leaves
    the parameter space on it.)
    """
    A = np.zeros((n, n))
    idx = np.arange(n - 1)
    A[idx, idx + 1] = A[idx + 1, idx] = 1.0
    return A / A.sum(axis=1, keepdims=True)


# ----------------------------------------------------------- sae, transcribed
def sae_eblup_fh(y, X, d, method="REML", precision=1e-12):
    """sae::eblupFH's Fisher scoring (REML or ML), then its EBLUP."""
    A = float(np.median(d))
    for _ in range(100):
        Vi = 1.0 / (A + d)
        XtVi = (Vi[:, None] * X).T
        Q = np.linalg.inv(XtVi @ X)
        if method == "REML":
            P = np.diag(Vi) - XtVi.T @ Q @ XtVi
            Py = P @ y
            s = -0.5 * np.trace(P) + 0.5 * Py @ Py
            F = 0.5 * np.trace(P @ P)
        else:
            beta = Q @ XtVi @ y
            r = y - X @ beta
            s = -0.5 * Vi.sum() + 0.5 * ((Vi * r) ** 2).sum()
            F = 0.5 * (Vi**2).sum()
        new = A + s / F
        done = abs(new - A) / A < precision
        A = new
        if done:
            break
    A = max(A, 0.0)
    Vi = 1.0 / (A + d)
    XtVi = (Vi[:, None] * X).T
    Q = np.linalg.inv(XtVi @ X)
    beta = Q @ XtVi @ y
    eblup = X @ beta + A * Vi * (y - X @ beta)
    return A, beta, eblup


def sae_mse_fh(A, X, d, method="REML"):
    """sae::mseFH's g1 + g2 + 2 g3 (ML: minus b * Bd^2)."""
    Vi = 1.0 / (A + d)
    Bd = d / (A + d)
    SumAD2 = (Vi**2).sum()
    Q = np.linalg.inv((Vi[:, None] * X).T @ X)
    VarA = 2.0 / SumAD2
    mse = np.empty(len(d))
    b = -np.trace(Q @ ((Vi**2)[:, None] * X).T @ X) / SumAD2
    for i in range(len(d)):
        g1 = d[i] * (1 - Bd[i])
        g2 = Bd[i] ** 2 * X[i] @ Q @ X[i]
        g3 = Bd[i] ** 2 * VarA / (A + d[i])
        mse[i] = g1 + g2 + 2 * g3 - (b * Bd[i] ** 2 if method == "ML" else 0.0)
    return mse


def sae_eblup_sfh(y, X, d, W, precision=1e-12):
    """sae::eblupSFH's REML Fisher scoring, then its EBLUP and mseSFH's MSE."""
    m = len(y)
    eye = np.eye(m)
    s2, rho = float(np.median(d)), 0.5
    for _ in range(200):
        derSigma = np.linalg.inv((eye - rho * W.T) @ (eye - rho * W))
        derRho = 2 * rho * W.T @ W - W - W.T
        derVRho = -s2 * (derSigma @ derRho @ derSigma)
        V = s2 * derSigma + np.diag(d)
        Vi = np.linalg.inv(V)
        XtVi = X.T @ Vi
        Q = np.linalg.inv(XtVi @ X)
        P = Vi - XtVi.T @ Q @ XtVi
        PD, PR, Pdir = P @ derSigma, P @ derVRho, P @ y
        s = np.array([-0.5 * np.trace(PD) + 0.5 * y @ PD @ Pdir,
                      -0.5 * np.trace(PR) + 0.5 * y @ PR @ Pdir])
        Idev = 0.5 * np.array([[np.trace(PD @ PD), np.trace(PD @ PR)],
                               [np.trace(PD @ PR), np.trace(PR @ PR)]])
        old = np.array([s2, rho])
        new = old + np.linalg.solve(Idev, s)
        new[1] = min(max(new[1], -0.999), 0.999)
        s2, rho = new
        if np.max(np.abs(new - old) / np.abs(old)) < precision:
            break
    Ci = np.linalg.inv((eye - rho * W.T) @ (eye - rho * W))
    G = s2 * Ci
    V = G + np.diag(d)
    Vi = np.linalg.inv(V)
    XtVi = X.T @ Vi
    Q = np.linalg.inv(XtVi @ X)
    beta = Q @ XtVi @ y
    eblup = X @ beta + G @ Vi @ (y - X @ beta)
    # mseSFH
    Ga = G - G @ Vi @ G
    Gb = G @ Vi @ X
    g1 = np.diag(Ga).copy()
    g2 = np.array([(X[i] - Gb[i]) @ Q @ (X[i] - Gb[i]) for i in range(m)])
    derRho = 2 * rho * W.T @ W - W - W.T
    Amat = -s2 * (Ci @ derRho @ Ci)
    P = Vi - XtVi.T @ Q @ XtVi
    PCi, PAmat = P @ Ci, P @ Amat
    Idev = 0.5 * np.array([[np.trace(PCi @ PCi), np.trace(PCi @ PAmat)],
                           [np.trace(PCi @ PAmat), np.trace(PAmat @ PAmat)]])
    Idevi = np.linalg.inv(Idev)
    ViCi, ViAmat = Vi @ Ci, Vi @ Amat
    l1 = ViCi - s2 * ViCi @ ViCi
    l2 = ViAmat - s2 * ViAmat @ ViCi
    g3 = np.empty(m)
    for i in range(m):
        L = np.vstack([l1.T[i], l2.T[i]])
        g3[i] = np.trace(L @ V @ L.T @ Idevi)
    psi = np.diag(d)
    D12aux = -(Ci @ derRho @ Ci)
    D22aux = 2 * s2 * Ci @ derRho @ Ci @ derRho @ Ci - 2 * s2 * Ci @ W.T @ W @ Ci
    D = (psi @ Vi @ D12aux @ Vi @ psi) * (Idevi[0, 1] + Idevi[1, 0]) \
        + psi @ Vi @ D22aux @ Vi @ psi * Idevi[1, 1]
    g4 = 0.5 * np.diag(D)
    return s2, rho, beta, eblup, g1 + g2 + 2 * g3 - g4


# ---------------------------------------------------------------------- tests
@pytest.mark.parametrize("method", ["REML", "ML"])
def test_fay_herriot_matches_sae_on_milk(method):
    data = milk()
    y, X, d = data.yi.to_numpy(), milk_design(data), data.SD.to_numpy() ** 2
    A, beta, eblup = sae_eblup_fh(y, X, d, method)
    fit = fit_fay_herriot(y, X, d, method)
    ours, mse, _, _ = fay_herriot_predict(fit, y, X, d, np.ones(len(y), dtype=bool))
    assert fit.s2u == pytest.approx(A, rel=1e-5)
    np.testing.assert_allclose(fit.beta, beta, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ours, eblup, rtol=1e-6)
    np.testing.assert_allclose(mse, sae_mse_fh(A, X, d, method), rtol=1e-5)


def test_spatial_fay_herriot_matches_sae_on_milk():
    data = milk()
    y, X, d = data.yi.to_numpy(), milk_design(data), data.SD.to_numpy() ** 2
    W = chain_weights(len(y))
    model = SarModel(y, X, d, W, np.ones(len(y), dtype=bool))
    with single_blas():
        s2, rho, beta, eblup, mse = sae_eblup_sfh(y, X, d, W)
        fit = fit_sar(model, "REML")
        ours, our_mse, _, _ = sar_predict(model, fit)
    assert fit.s2u == pytest.approx(s2, rel=1e-4)
    assert fit.rho == pytest.approx(rho, abs=1e-4)
    np.testing.assert_allclose(fit.beta, beta, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(ours, eblup, rtol=1e-5)
    np.testing.assert_allclose(our_mse, mse, rtol=1e-3)


def test_the_public_function_reproduces_sae_on_milk_given_as_a_frame():
    """The milk data as a report-like frame: published value, noise sd, no sampling part."""
    data = milk()
    frame = pd.DataFrame({"value": data.yi, "noise_std": data.SD, "cohort": data.ni,
                          "suppressed": False, "clip_low": 0.0, "clip_high": 0.0},
                         index=data.index)
    covariates = pd.DataFrame({"major": data.MajorArea.astype(str)}, index=data.index)
    smooth = small_area_estimates(frame, covariates=covariates, client_variance=0.0)
    y, X, d = data.yi.to_numpy(), milk_design(data), data.SD.to_numpy() ** 2
    A, _, eblup = sae_eblup_fh(y, X, d)
    assert smooth.sigma2_u == pytest.approx(A, rel=1e-5)
    np.testing.assert_allclose(smooth.frame.eblup, eblup, rtol=1e-6)
    np.testing.assert_allclose(smooth.frame.mse, sae_mse_fh(A, X, d), rtol=1e-5)
    assert list(smooth.coefficients.index) == ["intercept", "major_2", "major_3", "major_4"]
