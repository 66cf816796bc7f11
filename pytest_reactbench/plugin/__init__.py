"""pytest glue: options, collection, fixtures, reports and JUnit properties.

Registered through the `pytest11` entry point: this module is the plugin. Its hook
implementations are in hooks.py, its fixtures in fixtures.py. Without
--reactbench-agent the plugin collects nothing and changes nothing."""

from __future__ import annotations

from pytest_reactbench.plugin.fixtures import (
    reactbench_agent,
    reactbench_backend,
    reactbench_stages,
    reactbench_task,
    reactbench_trial,
)
from pytest_reactbench.plugin.hooks import (
    pytest_addhooks,
    pytest_addoption,
    pytest_collect_directory,
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_report_header,
    pytest_report_teststatus,
    pytest_runtest_makereport,
    pytest_runtestloop,
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_unconfigure,
)

__all__ = [
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_collect_directory",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_report_header",
    "pytest_report_teststatus",
    "pytest_runtest_makereport",
    "pytest_runtestloop",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
    "pytest_unconfigure",
    "reactbench_agent",
    "reactbench_backend",
    "reactbench_stages",
    "reactbench_task",
    "reactbench_trial",
]
