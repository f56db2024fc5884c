"""``mutagrad.scipy.ndimage``: ``scipy.ndimage`` with differentiable linear filters, interpolations and Fourier filters

* ``correlate1d``, ``convolve1d``, ``correlate``, ``convolve`` (in the input, the weights and ``cval``);
* ``uniform_filter1d``, ``uniform_filter``, ``gaussian_filter1d``, ``gaussian_filter`` (``order=``
  derivatives of the Gaussian, ``truncate``, ``radius``; in the input, ``sigma`` and ``cval``);
* ``sobel``, ``prewitt``, ``laplace``, ``gaussian_laplace``, ``gaussian_gradient_magnitude``;

* ``map_coordinates`` (in the input, the coordinates and ``cval``), ``shift`` (in the input, the
  shift and ``cval``), ``zoom`` (in the input and ``cval``), ``affine_transform`` (in the input, the
  matrix, the offset and ``cval``; every matrix form SciPy takes), ``rotate`` (in the input, the angle
  and ``cval``): spline orders 0 to 5, ``prefilter``;
* ``spline_filter1d``, ``spline_filter`` (in the input, real or complex);
* ``fourier_gaussian``, ``fourier_uniform``, ``fourier_ellipsoid`` (1-D to 3-D), ``fourier_shift``: the
  (transformed) input times the kernel, ``n`` and ``axis`` for a real transform, in the input (real or
  complex) and ``sigma``, ``size`` or ``shift``, SciPy's values to rounding (its own calls when nothing is traced);

* the rank filters ``minimum_filter1d``, ``maximum_filter1d``, ``minimum_filter``, ``maximum_filter``,
  ``rank_filter``, ``median_filter``, ``percentile_filter``, ``grey_erosion``, ``grey_dilation``
  (``size``, ``footprint``, a non-flat ``structure``; in the input, ``cval`` and the structure): each
  output the selected element of its window, a tie shared evenly as np.max's; SciPy's values, bit for
  bit, checked against the window's (where SciPy's value is not the window's, or the input holds NaN,
  they raise ``UnsupportedInputError``);

every boundary ``mode`` (per axis where SciPy takes a sequence), ``origin``, ``axis``/``axes``,
``output=`` (a dtype, or an array written in place, traced too), real or complex, with SciPy's
values (its own calls). Every other name is SciPy's own: ``geometric_transform``, ``generic_filter``
and the morphology beyond grey_erosion and grey_dilation raise mutagrad's escape error on a traced array.

>>> import numpy as np, mutagrad as mg
>>> import mutagrad.scipy.ndimage as mnd
>>> mg.grad(lambda x: np.sum(mnd.correlate1d(x, [1.0, -1.0], mode="constant") ** 2))(np.array([1.0, 2.0, 4.0]))
array([ 0., -2.,  4.])
"""
import scipy.ndimage as _nd

from ..rules.scipy.ndimage import (  # noqa: F401
    affine_transform,
    convolve,
    convolve1d,
    correlate,
    correlate1d,
    fourier_ellipsoid,
    fourier_gaussian,
    fourier_shift,
    fourier_uniform,
    gaussian_filter,
    gaussian_filter1d,
    gaussian_gradient_magnitude,
    gaussian_laplace,
    laplace,
    map_coordinates,
    prewitt,
    rotate,
    shift,
    sobel,
    spline_filter,
    spline_filter1d,
    uniform_filter,
    uniform_filter1d,
    zoom,
)
from ..rules.scipy.ndimage_rank import (  # noqa: F401
    grey_dilation,
    grey_erosion,
    maximum_filter,
    maximum_filter1d,
    median_filter,
    minimum_filter,
    minimum_filter1d,
    percentile_filter,
    rank_filter,
)


def __getattr__(name):
    return getattr(_nd, name)


def __dir__():
    return sorted(set(dir(_nd)) | set(globals()))
