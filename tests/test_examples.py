"""Every example runs as a script, checks its gradient and prints a verdict."""
import importlib.util
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")

# script -> words its last line must contain when the gradient check passes
VERDICTS = {
    "heat_inverse.py": "-> agree",
    "lotka_volterra_fit.py": "gradient vs central finite differences: agree",
    "quadrature.py": "agree with the analytic derivatives and finite differences",
    "seeds.py": "all seed gradients agree with finite differences",
}


def run(script, cwd):
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    return proc


@pytest.mark.parametrize("script", sorted(VERDICTS))
def test_example_runs_and_agrees(script, tmp_path):
    proc = run(script, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert VERDICTS[script] in lines[-1], proc.stdout
    assert "MISMATCH" not in proc.stdout
    if script == "heat_inverse.py":
        check_heat_inverse_output(proc, tmp_path)


def check_heat_inverse_output(proc, tmp_path):
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "heat_inverse.png").stat().st_size > 0
        assert "wrote heat_inverse.png" in proc.stdout
    else:
        assert "matplotlib is not installed" in proc.stdout
    error = [ln for ln in proc.stdout.splitlines() if ln.startswith("relative L2 error")]
    assert error and float(error[0].split(":")[1].split()[0]) < 0.2


def _load(name):
    spec = importlib.util.spec_from_file_location(f"_example_{name}", os.path.join(EXAMPLES, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_seeds_exit_code_is_one_on_mismatch(monkeypatch, capsys):
    seeds = _load("seeds")
    assert seeds.main() == 0
    real = seeds.finite_difference
    monkeypatch.setattr(seeds, "finite_difference", lambda f, args, n: real(f, args, n) + 1.0)
    assert seeds.main() == 1
    assert capsys.readouterr().out.strip().endswith("MISMATCH in a seed case")
