"""flamedeck's version: the package's (pyproject.toml reads it here) and the engine's,
written into the files it exports (its own module, so the exporters need not import the
package that imports them)."""

__version__ = "0.1.0"
