"""The request's own context as passages: which messages and documents are context, how each
passage is named, and JSON tool results made readable."""

from __future__ import annotations

import json

from middleware.chat.protocol import ChatRequest
from middleware.evidence.request_passages import readable, request_passages
from tests.support.context_doubles import PASTED, SYSTEM


def test_request_passages_are_named_by_where_they_came_from():
    request = ChatRequest.model_validate({
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What does the tool say?"},  # a question only: no facts
            {"role": "assistant", "content": "Acme is in Paris.", "tool_calls": []},  # the model's own words: not evidence
            {"role": "tool", "content": '{"company": "Acme", "revenue_usd": 5000000, "year": 2023}'},
            {"role": "user", "content": "Tell me about Acme."},  # the request, not evidence
            {"role": "user", "content": [{"type": "text", "text": PASTED}]},  # a pasted document
        ],
        "factcheck": {"context": ["Acme's logo is green.",
                                  {"text": "# About Acme\n\nAcme has 3 offices.", "source": "https://acme.example/about"},
                                  {"text": "Acme was listed in 1990.", "source": "handbook.pdf"}]},
    })
    passages = request_passages(request)
    assert {p.provider for p in passages} == {"context"}
    sources = [p.source for p in passages]
    assert sources[:3] == ["messages[0] (system)", "messages[0] (system)", "messages[3] (tool)"]
    assert set(sources[3:-3]) == {"messages[5] (user)"}
    assert sources[-3:] == ["factcheck.context[0]", "factcheck.context[1]", "factcheck.context[2]"]
    assert SYSTEM[passages[1].start : passages[1].end] == passages[1].text  # offsets into the message
    assert "revenue usd: 5000000" in passages[2].text  # JSON tool result made readable
    about, handbook = passages[-2], passages[-1]
    assert (about.title, about.url) == ("About Acme", "https://acme.example/about")
    assert (handbook.title, handbook.url) == ("handbook.pdf", None)
    assert len({p.id for p in passages}) == len(passages)


def test_json_tool_result_keeps_each_objects_fields_in_one_line():
    text = json.dumps({"results": [{"title": "Eiffel Tower", "completed": 1889, "tags": ["iron", "Paris"]},
                                   {"title": "Big Ben", "completed": 1859}]})
    assert readable(text) == ("- results — title: Eiffel Tower; completed: 1889\n- tags: iron, Paris\n"
                              "- results — title: Big Ben; completed: 1859\n")
    assert readable("plain words, not JSON") == "plain words, not JSON"
    assert readable("[not, json") == "[not, json"
    assert readable("42") == "42"


def test_structured_data_as_python_prints_it_reads_in_words():
    data = {"name": "Finch & Fork", "state": "CA", "attributes": {"OutdoorSeating": False, "WiFi": "free",
            "RestaurantsTakeOut": True}, "review_info": [{"review_stars": 5.0, "note": None}]}  # fmt: skip
    assert readable(str(data)) == ("- name: Finch & Fork; state: CA (California)\n"
                                   "- attributes — Outdoor Seating: no; WiFi: free; Restaurants Take Out: yes\n"
                                   "- review info — review stars: 5.0; note: null\n")
    assert readable("{'unbalanced': [1, 2}") == "{'unbalanced': [1, 2}"


def test_opening_hours_read_with_the_clock_times_answers_write():
    """RAGTruth's business records give hours as '17:30-23:0'; answers say '5:30 PM to 11 PM'."""
    hours = readable(str({"hours": {"Monday": "17:30-23:0", "Sunday": "9:0-14:0", "Friday": "0:0-0:0"}}))
    assert hours == ("- hours — Monday: 17:30-23:00 (5:30 PM to 11:00 PM); Sunday: 9:00-14:00 (9:00 AM to 2:00 PM); "
                     "Friday: 0:00-0:00 (12:00 AM to 12:00 AM)\n")
    assert readable(str({"state": "Bavaria", "range": "1:2-3:4 of 9"})) == "- state: Bavaria; range: 1:2-3:4 of 9\n"


def test_a_factcheck_context_document_of_structured_data_is_read_like_a_tool_result():
    [passage] = request_passages(ChatRequest.model_validate({
        "messages": [{"role": "user", "content": "Describe it."}],
        "factcheck": {"context": [str({"name": "Finch & Fork", "OutdoorSeating": False})]}}))
    assert passage.text == "name: Finch & Fork; Outdoor Seating: no"  # the list marker is no part of a sentence
