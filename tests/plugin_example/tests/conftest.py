"""The testing kit's fixtures, which its pytest plugin gives only to a project that asks."""

pytest_plugins = ["shadowclone_testing.pytest_plugin"]
