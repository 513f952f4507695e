"""The single file's first lines (PyInstaller runs this script): sampler's own entry."""

from sampler.start import entry

entry()
