"""Answer links, as a notification carries them to anyone who reads its topic: each answers
its one question (that question, not a later one with its id) with its one option, once,
until the question's timeout; an expired or used link says so in one line."""

from __future__ import annotations

from shadowclone.config import Paths
from shadowclone.dashboard.keys import LINK_GRACE_S, answer_urls
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressKind, ProgressLine, Question, Record, State, Step
from shadowclone.plugin.node import LocalNode
from shadowclone_testing.serving import Scripts
from shadowclone_testing.web import Site


def asking(node: LocalNode, home: Paths, question: Question) -> str:
    """A running clone whose open question is `question` (as its run program writes it)."""
    clone = node.start("acme/app#1")
    folder = RunFolder(home.clones_dir / clone.id)
    folder.write_record(Record(id=clone.id, state=State.WAITING, question=question))
    folder.append_progress(ProgressLine(Step.ENGINE, ProgressKind.QUESTION, question=question))
    return clone.id


def test_a_link_answers_only_its_own_question_once_until_it_expires(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site
) -> None:
    first = Question(id="q1", text="merge now?", options=("yes", "no"), recommended="no")
    clone_id = asking(sc_node, sc_home, first)
    # The clone's question q1 is another than the one the links were made for.
    other = Question(id="q1", text="delete the branch?", options=("yes", "no"), recommended="no")
    stale = answer_urls(site.url, site.token, clone_id, other)["yes"]
    links = answer_urls(site.url, site.token, clone_id, first, now=site.clock())
    late = answer_urls(site.url, site.token, clone_id, first, now=site.clock())
    with site.client() as reader:
        refused = reader.post(stale)
        assert refused.status_code == 403
        assert refused.text == "refused: this link is for another question"
        assert reader.post(links["no"]).text == "answered q1: no"
        used = reader.post(links["no"])
        assert (used.status_code, used.text) == (410, "this answer link was used already")
        assert reader.post(links["yes"]).status_code == 410  # one answer for the set
        # Another set for the same question: the node's rule, one line.
        twice = reader.post(late["yes"])
        assert (twice.status_code, twice.text) == (409, "question q1 is already answered")
        site.clock.later(first.timeout_s + LINK_GRACE_S + 1)
        expired = reader.post(late["no"])
        assert (expired.status_code, expired.text) == (410, "this answer link has expired")
    lines, _, _ = RunFolder(sc_home.clones_dir / clone_id).inbox()
    assert [(line.question_id, line.text) for line in lines] == [("q1", "no")]
