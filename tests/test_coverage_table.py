"""docs/coverage.md is generated from the registries and must be current."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_coverage_table_is_current():
    # The checkout itself goes first on the path, so the table is checked against this
    # source tree whether or not mutagrad is installed (the script's own directory is tools/).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "coverage_table.py"), "--check"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr + "\nrun: python tools/coverage_table.py"


def test_coverage_table_lists_what_is_registered():
    sys.path.insert(0, str(ROOT / "tools"))
    import coverage_table

    rows = coverage_table.collect()
    assert rows["np.sin"][:2] == (True, True)
    assert rows["np.argmax"][:2] == (False, False)
    assert "np.less" in rows and rows["np.less"][:2] == (False, False)
    assert rows["np.nextafter"][:2] == (False, False)  # registered, but with no derivative
    # the distributions of mutagrad.scipy.stats, a row per method
    assert rows["scipy.stats.norm.logpdf"][:2] == (True, True)
    assert rows["scipy.stats.weibull_min.ppf"][:2] == (True, True)
    assert "NotImplementedTangent" in rows["scipy.stats.chi2.cdf"][2]
    assert "NotImplementedTangent" not in rows["scipy.stats.chi2.logpdf"][2]
