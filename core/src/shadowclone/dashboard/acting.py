"""What the owner does from the dashboard (answer, send, stop), through the node's operations
as the CLI's commands do, and the answer links of notifications: signed for one clone, one
question and one option, each gives that answer once and nothing else."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from shadowclone.dashboard.gate import Gate
from shadowclone.dashboard.keys import question_digest, read_answer_link
from shadowclone.errors import ShadowcloneError
from shadowclone.node.schemas import Via
from shadowclone.plugin.node import LocalNode


class Actions:
    """The forms' and the links' handlers."""

    def __init__(self, node: LocalNode, gate: Gate, clock: Callable[[], float] = time.time) -> None:
        self.node = node
        self.gate = gate
        self.clock = clock
        self.used_links: dict[str, int] = {}
        """The answer links used (by nonce), until they expire."""

    async def _act(self, request: Request, act: Callable[[dict[str, str]], str]) -> Response:
        clone_id = request.path_params["clone_id"]
        form = {k: str(v) for k, v in (await request.form()).items()}
        target = f"/clones/{quote(clone_id)}"
        session = self.gate.session_of(request)
        try:
            said = await asyncio.to_thread(act, form)
        except ShadowcloneError as error:
            if session is None:
                return PlainTextResponse(str(error), status_code=409)
            session.flash.append(("error", str(error)))
            return RedirectResponse(target, status_code=303)
        if session is None:
            return PlainTextResponse(said)
        session.flash.append(("said", said))
        return RedirectResponse(target, status_code=303)

    async def answer(self, request: Request) -> Response:
        clone_id = request.path_params["clone_id"]

        def act(form: dict[str, str]) -> str:
            question_id, choice = form.get("question_id", ""), form.get("choice", "")
            self.node.answer(clone_id, question_id, choice, via=Via.DASHBOARD)
            return f"answered {question_id}: {choice}"

        return await self._act(request, act)

    async def send(self, request: Request) -> Response:
        clone_id = request.path_params["clone_id"]

        def act(form: dict[str, str]) -> str:
            line = self.node.send(clone_id, form.get("text", ""), via=Via.DASHBOARD)
            return f"message {line.id} sent"

        return await self._act(request, act)

    async def stop(self, request: Request) -> Response:
        clone_id = request.path_params["clone_id"]

        def act(_form: dict[str, str]) -> str:
            view = self.node.stop(clone_id)
            return f"clone {view.id} is stopping"

        return await self._act(request, act)

    async def linked_answer(self, request: Request) -> Response:
        """An answer link from a notification: it answers its one question, once."""
        clone_id = request.path_params["clone_id"]
        question_id = request.path_params["question_id"]
        link = read_answer_link(self.gate.token, clone_id, question_id, request.query_params)
        if link is None:
            return PlainTextResponse("refused: this link is not signed for that", 403)
        now = self.clock()
        for nonce, expires in list(self.used_links.items()):
            if expires < now:
                del self.used_links[nonce]
        if link.nonce in self.used_links:
            return PlainTextResponse("this answer link was used already", status_code=410)
        if link.expires < now:
            return PlainTextResponse("this answer link has expired", status_code=410)
        self.used_links[link.nonce] = link.expires  # before the answer: a second press waits
        try:
            view = await asyncio.to_thread(self.node.get, clone_id, 1)
            asked = view.question
            if (
                asked is not None
                and asked.id == question_id
                and question_digest(asked) != link.question
            ):
                del self.used_links[link.nonce]
                return PlainTextResponse("refused: this link is for another question", 403)
            await asyncio.to_thread(
                self.node.answer, clone_id, question_id, link.choice, Via.NOTIFICATION
            )
        except ShadowcloneError as error:
            self.used_links.pop(link.nonce, None)  # not spent: the node's refusal stands
            return PlainTextResponse(str(error), status_code=409)
        return PlainTextResponse(f"answered {question_id}: {link.choice}")
