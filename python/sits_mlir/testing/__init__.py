"""Testing helpers: `reference.evaluate` interprets imported modules with NumPy."""
