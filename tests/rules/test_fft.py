"""np.fft: every transform with n/s, axis/axes and the three norms, real and
complex inputs, both modes against finite differences. The transforms are
linear; the order=2 cases compose them with a nonlinearity."""
import numpy as np
import pytest

import mutagrad as mg
from mutagrad.testing import check_grads
from tests.rules._draws import Draws  # noqa: E402

_draws = Draws(6)
R, C = _draws.R, _draws.C
F = np.fft
NORMS = (None, "backward", "ortho", "forward")


def _1d_cases(name, inputs, sizes):
    fn = getattr(F, name)
    cases = []
    for i, norm in enumerate(NORMS):
        for x in inputs:
            n = sizes[i % len(sizes)]
            cases.append((f"np.fft.{name}", lambda a, fn=fn, n=n, norm=norm: fn(a, n=n, norm=norm), (x,), 1))
    return cases


# (covers, function, args, order)
CASES = [
    *_1d_cases("fft", (R(5), C(2, 6)), (None, 4, 8, None)),
    *_1d_cases("ifft", (R(5), C(2, 6)), (8, None, 3, 6)),
    *_1d_cases("rfft", (R(5), R(2, 6)), (None, 4, 7, 8)),
    *_1d_cases("ihfft", (R(6), R(2, 5)), (None, 3, 8, 5)),
    # irfft/hfft ignore the imaginary part of the DC and Nyquist bins: FD sees it
    *_1d_cases("irfft", (C(5), C(2, 4), R(4)), (None, 7, 3, 8)),
    *_1d_cases("hfft", (C(5), C(2, 4)), (None, 8, 5, 3)),
    ("np.fft.fft", lambda a: F.fft(a, 3, 0, "ortho"), (C(4, 3),), 2),
    ("np.fft.fft", lambda a: np.abs(F.fft(a)) ** 2, (R(6),), 2),
    ("np.fft.ifft", lambda a: F.ifft(a, axis=0), (C(4, 3),), 2),
    ("np.fft.rfft", lambda a: np.abs(F.rfft(a, axis=0)) ** 2, (R(6, 2),), 2),
    ("np.fft.irfft", lambda a: F.irfft(a * a, axis=0), (C(3, 2),), 2),
    ("np.fft.hfft", lambda a: F.hfft(a, axis=0) ** 2, (C(4, 2),), 2),
    ("np.fft.ihfft", lambda a: F.ihfft(a ** 3), (R(5),), 2),
    ("np.fft.fft2", F.fft2, (C(3, 4),), 2),
    ("np.fft.fft2", lambda a: F.fft2(a, s=(2, 5), norm="ortho"), (R(3, 4),), 1),
    ("np.fft.ifft2", lambda a: F.ifft2(a, axes=(0, 2)), (C(3, 2, 4),), 1),
    ("np.fft.ifft2", lambda a: F.ifft2(a, norm="forward"), (R(3, 4),), 1),
    ("np.fft.fftn", F.fftn, (C(2, 3, 4),), 1),
    ("np.fft.fftn", lambda a: F.fftn(a, s=(3, 2), axes=(2, 0), norm="forward"), (C(2, 3, 4),), 1),
    ("np.fft.ifftn", F.ifftn, (R(2, 3, 4),), 1),
    ("np.fft.ifftn", lambda a: F.ifftn(a, s=(5,), axes=(1,), norm="ortho"), (C(2, 3),), 1),
    ("np.fft.rfftn", F.rfftn, (R(2, 3, 4),), 1),
    ("np.fft.rfftn", lambda a: F.rfftn(a, s=(4, 5), axes=(0, 2)), (R(2, 3, 4),), 1),
    ("np.fft.rfft2", F.rfft2, (R(3, 4),), 1),
    ("np.fft.rfft2", lambda a: F.rfft2(a, s=(3, 3), norm="ortho"), (R(3, 4),), 1),
    ("np.fft.irfftn", F.irfftn, (C(2, 3, 3),), 1),
    ("np.fft.irfftn", lambda a: F.irfftn(a, s=(4, 5), axes=(0, 2), norm="ortho"), (C(2, 3, 4),), 1),
    ("np.fft.irfft2", F.irfft2, (C(3, 4),), 1),
    ("np.fft.irfft2", lambda a: F.irfft2(a, s=(2, 5), norm="forward"), (C(3, 4),), 1),
    ("np.fft.fftshift", F.fftshift, (R(5),), 1),
    ("np.fft.fftshift", lambda a: F.fftshift(a, axes=1), (C(3, 4),), 1),
    ("np.fft.ifftshift", F.ifftshift, (R(2, 5),), 1),
    ("np.fft.ifftshift", lambda a: F.ifftshift(a, axes=(0,)) ** 2, (R(3, 4),), 2),
]


@pytest.mark.parametrize("covers,fn,args,order", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(covers, fn, args, order):
    check_grads(fn, *args, modes=("fwd", "rev"), order=order)


def test_fft_out_argument():
    def f(x):
        out = np.zeros_like(x, dtype=complex)  # a traced buffer
        np.fft.fft(x, out=out)
        return out * 1.0
    check_grads(f, R(4))


def test_power_spectrum_closed_form():
    # sum |fft(x)|² = n sum x² (Parseval): gradient 2 n x
    x = R(6)
    np.testing.assert_allclose(mg.grad(lambda a: np.sum(np.abs(np.fft.fft(a)) ** 2))(x), 12 * x)


def test_irfft_ignores_imaginary_edge_bins():
    z = C(5)  # n = 8: bins 0 and 4 are DC and Nyquist
    g = mg.grad(lambda a: np.sum(np.fft.irfft(a) * np.arange(8.0)))(z)
    assert g[0].imag == 0 and g[4].imag == 0
    check_grads(np.fft.irfft, z)


def test_float32_keeps_its_precision():
    x = R(4).astype(np.float32)
    g = mg.grad(lambda a: np.sum(np.abs(np.fft.rfft(a)) ** 2))(x)
    assert g.dtype == np.float32
