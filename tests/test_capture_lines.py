"""What capture says of baseline runs that are not nights."""

from hpc_health.store.capture_lines import span_note


def test_runs_minutes_apart_are_said_not_to_be_nights():
    walk = ["2026-11-29T01:17:27Z", "2026-11-29T01:19:52Z", "2026-11-29T01:21:52Z",
            "2026-11-29T01:23:53Z", "2026-11-29T01:25:53Z"]
    note = span_note(walk)
    assert "these 5 runs span 8 minutes, not 5 nights" in note, note


def test_nights_and_single_runs_pass_without_a_note():
    nights = [f"2026-11-{d:02d}T02:00:00Z" for d in range(20, 25)]
    assert span_note(nights) == ""
    assert span_note(["2026-11-29T01:17:27Z", "", "202610101T020000Z"]) == ""
    assert "3.0 hours" in span_note(["2026-11-29T01:00:00Z", "2026-11-29T04:00:00Z"])
