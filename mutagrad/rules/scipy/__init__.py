"""Rules for SciPy; loaded only when SciPy is importable."""
