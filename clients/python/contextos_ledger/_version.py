"""The package's version: `make packages` stamps the daemon's release version here in its build copy."""

__version__ = "0.0.0.dev0"
