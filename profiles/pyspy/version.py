"""The engine's version, written into the files it exports (its own module, so the
exporters need not import the package that imports them)."""

__version__ = "1.0"
