"""The typed fairness summary: its JSON is the summary.json the untyped tables gave, key for key."""

from __future__ import annotations

import pytest

from judges.fairness_model import FairnessSummary
from judges.fairness_summary import FairnessSummarizer
from tests.judges.test_fairness_summary import (
    MANIFEST,
    audit_dialogues,
    gender_dialogues,
    opposite_dialogues,
    records,
    ses_dialogues,
    two_domain_dialogues,
)

DESIGNS = {
    "gender": gender_dialogues,
    "ses": ses_dialogues,
    "opposite": opposite_dialogues,
    "two domains": lambda: two_domain_dialogues()[0],
    "audit": audit_dialogues,
}


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_the_untyped_summary_types_without_changing_a_key(design: str) -> None:
    untyped = FairnessSummarizer().summarize(records(DESIGNS[design]()), MANIFEST)
    assert FairnessSummary.model_validate(untyped).model_dump(mode="json") == untyped
