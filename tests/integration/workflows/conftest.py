"""Workflow tests use the session dev server and the `saga` harness from tests/conftest.py."""
