"""The toolchain stage: the repository's own check commands, run in the workspace."""

from __future__ import annotations

import subprocess

from shadowclone.plugin.types import ReviewContext, ReviewResult

OUTPUT_TAIL_CHARS = 4000


class ToolchainStage:
    """Runs each check command in turn; a failing command fails the stage but not the clone."""

    name = "toolchain"

    def __init__(self, timeout_s: float = 30 * 60) -> None:
        self.timeout_s = timeout_s

    def run(self, context: ReviewContext) -> ReviewResult:
        if not context.owner_wrote:
            return ReviewResult(self.name, True, "skipped: the owner did not write this code")
        if not context.check_commands:
            return ReviewResult(self.name, True, "no check commands configured")
        failed: list[str] = []
        details: list[str] = []
        for command in context.check_commands:
            try:
                done = subprocess.run(
                    # As the engine: the code it runs is the repository's, which the engine
                    # could have changed.
                    [*context.run_as, "/bin/sh", "-c", command],
                    cwd=context.workspace,
                    env=dict(context.env) if context.env else None,
                    capture_output=True,
                    text=True,
                    timeout=self.timeout_s,
                    check=False,
                )
                code, output = done.returncode, done.stdout + done.stderr
            except subprocess.TimeoutExpired as expired:
                code, output = -1, f"timed out after {expired.timeout:.0f} s"
            details.append(f"$ {command}\n(exit {code})\n{output[-OUTPUT_TAIL_CHARS:]}")
            if code != 0:
                failed.append(command)
        if failed:
            return ReviewResult(
                self.name,
                False,
                f"{len(failed)} of {len(context.check_commands)} checks failed: "
                + ", ".join(failed),
                "\n".join(details),
            )
        return ReviewResult(
            self.name, True, f"{len(context.check_commands)} checks passed", "\n".join(details)
        )
