"""`shadowclone setup OWNER/REPO`: check this machine and the repository, record the setup."""

from __future__ import annotations

import click
from rich.text import Text

from shadowclone.cli.app import App, emit_json, format_progress, json_option, pass_app
from shadowclone.cli.params import ENGINE
from shadowclone.config import load_config
from shadowclone.errors import Refused
from shadowclone.node.schemas import ProgressLine, Step
from shadowclone.plugin import load_registry
from shadowclone.setup import Check, setup_repository


@click.command()
@click.argument("repo", metavar="OWNER/REPO")
@click.option(
    "--engine", type=ENGINE, help="An installed engine: claude, codex... (default: the config's)."
)
@click.option("--image", help="The clone image for this repository (default: the config's).")
@click.option(
    "--check",
    "check_commands",
    multiple=True,
    metavar="COMMAND",
    help="A check command the toolchain review runs on your own pull requests (repeatable).",
)
@click.option(
    "--build/--no-build",
    default=True,
    show_default=True,
    help="Build the image of the environment the repository declares now (otherwise serve "
    "builds it before the first clone).",
)
@click.option(
    "--devcontainer",
    "devcontainer_path",
    metavar="PATH",
    help="The dev container configuration to read when the repository has several "
    "(.devcontainer/NAME/devcontainer.json; default: .devcontainer/devcontainer.json, then "
    ".devcontainer.json, or the only one).",
)
@json_option
@pass_app
def setup(
    app: App,
    repo: str,
    engine: str | None,
    image: str | None,
    check_commands: tuple[str, ...],
    build: bool,
    devcontainer_path: str | None,
    as_json: bool,
) -> int:
    """Prepare a repository for clones on this machine; changes nothing on GitHub."""
    config, paths = load_config(app.paths)

    def show_check(check: Check) -> None:
        # Styled, never markup: a check's detail may quote what GitHub or a clone said.
        mark = ("ok  ", "green") if check.passed else ("FAIL", "red")
        app.out.print(Text.assemble(mark, f" {check.name:<21} {check.detail}"))
        if check.name == "launcher" and check.passed:
            app.out.print(
                "     check clone           starting (it reads the secrets and asks GitHub)"
            )

    def show_progress(line: ProgressLine) -> None:
        who = "environment" if line.step is Step.PREPARE else "check clone"
        app.out.print(Text(f"     {who:<21} {format_progress(line)}", style="dim"))

    summary = setup_repository(
        config,
        paths,
        load_registry(config.plugins.disabled),
        repo,
        engine=engine,
        image=image,
        check_commands=check_commands,
        on_check=None if as_json else show_check,
        on_progress=None if as_json else show_progress,
        build=build,
        devcontainer_path=devcontainer_path,
    )
    if as_json:
        emit_json(summary)
    else:
        for step in summary.next_steps:
            app.out.print(f"next: {step}")
    if summary.refused:
        failed = next(c for c in reversed(summary.checks) if not c.passed)
        raise Refused(f"setup of {summary.repo} refused: {failed.detail}")
    return 0 if summary.ok else 1
