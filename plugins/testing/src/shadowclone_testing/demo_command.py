"""`shadowclone demo`, which the kit adds to the `shadowclone` command through the entry-point
group `shadowclone.commands`: its options only, light to import since `--help` lists it; the demo
(demo.py, the fakes, serve) is imported when it runs."""

from __future__ import annotations

import click
from shadowclone.config.schema import DEMO_IMAGE


@click.command()
@click.option("--keep", is_flag=True, help="Keep the temporary home and print where it is.")
@click.option(
    "--launcher",
    type=click.Choice(["fake", "docker"]),
    default="fake",
    show_default=True,
    help="fake: the clone runs as a local process; docker: in a container of the clone image.",
)
@click.option(
    "--image",
    help=f"With --launcher docker: an image with the scripted engine (default: {DEMO_IMAGE}, "
    "which `shadowclone image build --demo` builds).",
)
@click.pass_context
def demo(ctx: click.Context, keep: bool, launcher: str, image: str | None) -> None:
    """Run one whole clone against a local fake GitHub: no account, and no Docker unless
    you ask for it."""
    from shadowclone.cli.app import App

    from shadowclone_testing.demo import run_demo

    app = ctx.find_object(App)
    if app is None:
        raise click.UsageError("shadowclone demo runs as a command of `shadowclone`")
    run_demo(app, keep, launcher, image)
