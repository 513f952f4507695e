"""Delve's terminal client, driven over a pty: transport (wire), parse (text), backend (logic)."""
