"""Adapters that run agents of other frameworks as sagas: every tool call their agent
makes becomes a journaled saga step (sagacity.workflows.saga), so a tool failure the
framework hands back to its model still fails and compensates the saga, irreversible
tools wait for the payload-bound approval, and the journal keeps the evidence.

Each adapter is a subpackage with its framework as an optional dependency (an extra of
the sagacity distribution); importing sagacity never imports any of them. This layer may
use the core, activities and workflows, never the worker.
"""
