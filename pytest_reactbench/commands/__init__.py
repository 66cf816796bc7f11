"""What each subcommand of the `reactbench` command does, by concern: the base images
(`images`), the tasks' checks (`validate`), results (`report`, `export`, `compare`), a
recorded trial run again (`replay`), and tasks mined from a repository's history
(`mine`). The parser and `main` are in `pytest_reactbench.cli`; each `run_` function takes
its parsed arguments and returns the command's exit code.
"""
