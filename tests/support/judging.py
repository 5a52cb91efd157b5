"""One judged case: the case, the answer, and the judge's key in the environment a judge is built from."""

from __future__ import annotations

from evalgate.model import Answer, Case

KEY = "sk-judge-test-0f1e2d3c4b5a"


ENV = {"LOCAL_JUDGE_API_KEY": KEY, "OPENAI_API_KEY": KEY}


CASE = Case(id="c1", input="Should I drop Giannis on a rumour?", expected_output="No, wait for official news.",
            passing_criteria="advises waiting for confirmation", retrieval_context=["Giannis is listed as probable."])


ANSWER = Answer(output="Wait for the official injury report before dropping him.")
