"""What .ci/image.sh asks the running image, with nothing but the standard library (the
checker depends on nothing the image ships):

    python3 .ci/image_check.py wait URL SECONDS   # until GET URL/healthz answers 200
    python3 .ci/image_check.py check URL          # /healthz, a streamed chat, /metrics

``check`` streams one chat completion in annotate mode through the proxy (the demo LLM's
Eiffel Tower answer, whose "completed in March 1899" the demo corpus contradicts: 1889),
prints what came back and exits non-zero unless: /healthz says ok; the stream carries
content, a sentence report for every sentence, the summary and [DONE]; the planted error is
reported contradictory and at least one other sentence attributable; /metrics is the
Prometheus exposition with this request counted.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlparse

QUESTION = "When was the Eiffel Tower built?"
PLANTED = "completed in March 1899"


def fail(message: str) -> None:
    print(f"image_check: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def get(url: str, timeout: float = 10.0) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read().decode()


def wait(base: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    last = "no answer yet"
    while time.monotonic() < deadline:
        try:
            status, _, body = get(f"{base}/healthz", timeout=5)
            if status == 200:
                print(f"image_check: /healthz answered {status} {body}")
                return
            last = f"{status} {body}"
        except (OSError, urllib.error.URLError) as exc:
            last = repr(exc)
        time.sleep(1)
    fail(f"/healthz did not answer 200 within {seconds:.0f} s (last: {last})")


def stream_chat(base: str) -> tuple[str, list[dict[str, Any]], dict[str, Any] | None, bool]:
    """POST a streamed chat completion; return content, reports, summary, whether [DONE] came."""
    url = urlparse(base)
    body = json.dumps({
        "model": "factcheck-demo", "stream": True, "factcheck": {"mode": "annotate"},
        "messages": [{"role": "user", "content": QUESTION}],
    })
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    conn.request("POST", f"{url.path}/v1/chat/completions", body=body,
                 headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    response = conn.getresponse()
    if response.status != 200:
        fail(f"chat completion answered {response.status}: {response.read()[:500]!r}")
    content_type = response.getheader("Content-Type", "")
    if not content_type.startswith("text/event-stream"):
        fail(f"chat completion is not an event stream: {content_type}")
    content: list[str] = []
    reports: list[dict[str, Any]] = []
    summary = None
    done = False
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        chunk = json.loads(data)
        for choice in chunk.get("choices") or []:
            content.append((choice.get("delta") or {}).get("content") or "")
        event = chunk.get("factcheck")
        if event and event.get("type") == "sentence":
            reports.append(event["report"])
        elif event and event.get("type") == "summary":
            summary = event["summary"]
    conn.close()
    return "".join(content), reports, summary, done


def check(base: str) -> None:
    status, content_type, body = get(f"{base}/healthz")
    if status != 200 or json.loads(body) != {"status": "ok"}:
        fail(f"/healthz answered {status} {body}")
    print(f"image_check: GET /healthz -> {status} {content_type} {body}")

    started = time.monotonic()
    content, reports, summary, done = stream_chat(base)
    elapsed = time.monotonic() - started
    print(f"image_check: POST /v1/chat/completions (stream, annotate) -> {len(content)} characters, "
          f"{len(reports)} sentence reports, summary {'yes' if summary else 'no'}, [DONE] {done}, {elapsed:.1f} s")
    print(f"image_check:   answer: {content}")
    for report in reports:
        verdict = report["verdict"]
        why = verdict.get("reason") or verdict.get("evidence_sentence") or ""
        print(f"image_check:   [{verdict['label']}] {report['text']}" + (f"  <- {why}" if why else ""))
    if summary:
        print(f"image_check:   summary: sentences {summary['sentences']}, verdicts {summary['verdicts']}, "
              f"mode {summary['mode']}, attribution report {len(summary['attribution_report'])} passages")
    if not content or not done:
        fail("the stream ended without content or without [DONE]")
    if summary is None or summary["mode"] != "annotate":
        fail(f"no annotate-mode summary in the stream: {summary}")
    if len(reports) != summary["sentences"] or not reports:
        fail(f"{len(reports)} sentence reports for {summary['sentences']} sentences")
    labels = {report["text"]: report["verdict"]["label"] for report in reports}
    planted = [label for text, label in labels.items() if PLANTED in text]
    if planted != ["contradictory"]:
        fail(f"the planted error ({PLANTED!r}) was reported {planted}, not contradictory")
    if "attributable" not in labels.values():
        fail("no sentence was found attributable to the demo corpus")

    status, content_type, body = get(f"{base}/metrics")
    counted = [line for line in body.splitlines()
               if line.startswith("factcheck_http_requests_total{") and 'endpoint="chat"' in line]
    print(f"image_check: GET /metrics -> {status} {content_type}, {len(body.splitlines())} lines; "
          + "; ".join(counted))
    if status != 200 or not content_type.startswith("text/plain") or not counted:
        fail("/metrics did not serve the exposition with the chat request counted")
    print("image_check: OK")


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[0] == "wait":
        wait(argv[1].rstrip("/"), float(argv[2]))
    elif len(argv) == 2 and argv[0] == "check":
        check(argv[1].rstrip("/"))
    else:
        fail(f"usage: {__doc__}")


if __name__ == "__main__":
    main(sys.argv[1:])
