"""Composition root: settings, new_worker(), the `sagacity` CLI. The only layer that
reads configuration and picks backends."""
