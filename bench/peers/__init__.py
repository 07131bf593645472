"""Python LDP peers (and the vectorised NumPy reference) measured by bench/compare.py."""
