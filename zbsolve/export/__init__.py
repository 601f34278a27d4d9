"""Exporters: read a schedule object, write another tool's format."""
