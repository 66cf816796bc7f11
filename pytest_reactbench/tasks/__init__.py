"""Tasks: the Harbor-format directories, read into typed models."""

from pytest_reactbench.tasks.load import Task, TaskError, find_tasks, load_task
from pytest_reactbench.tasks.models import (
    Artifact,
    EnvironmentConfig,
    Reward,
    TaskConfig,
    TestsConfig,
)

__all__ = [
    "Artifact",
    "EnvironmentConfig",
    "Reward",
    "Task",
    "TaskConfig",
    "TaskError",
    "TestsConfig",
    "find_tasks",
    "load_task",
]
