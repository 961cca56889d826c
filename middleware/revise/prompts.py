"""RARR's revision prompts (Gao et al., 2023) for the ``llm`` editor: the agreement gate
(chain of thought: what the statement implies, what the evidence implies, then agree or
disagree) and the edit (first name the span to change, then its replacement, minimally).

Statement, evidence and context go in only inside nonce fences (``pipeline.prompts.fence``);
the parsers read fixed line prefixes and never follow free text."""

from __future__ import annotations

import re

from middleware.pipeline.prompts import UNTRUSTED_NOTE, fence

_AGREEMENT_EXAMPLES = """Statement: The Eiffel Tower was completed in 1899 for the World's Fair.
Evidence: The Eiffel Tower was built for the 1889 World's Fair and completed in March 1889.
Statement says: it was completed in 1899.
Evidence says: it was completed in 1889.
Verdict: disagree

Statement: Marie Curie shared the 1903 Nobel Prize in Physics with Pierre Curie.
Evidence: She shared the 1903 Nobel Prize in Physics with Pierre Curie and Henri Becquerel.
Statement says: she shared the 1903 physics prize with Pierre Curie.
Evidence says: she shared it with Pierre Curie and Henri Becquerel, which includes Pierre Curie.
Verdict: agree

Statement: The Amazon River flows into the Atlantic Ocean.
Evidence: The Nile is about 6,650 kilometres long.
Statement says: the Amazon flows into the Atlantic.
Evidence says: nothing about the Amazon.
Verdict: irrelevant"""

_EDIT_EXAMPLES = """Statement: The Eiffel Tower was completed in 1899 for the World's Fair.
Evidence: The Eiffel Tower was built for the 1889 World's Fair and completed in March 1889.
Span: 1899
Replacement: 1889

Statement: The Volga flows out of the Caspian Sea.
Evidence: The Volga rises in the Valdai Hills and empties into the Caspian Sea.
Span: flows out of
Replacement: flows into"""


def agreement_messages(statement: str, evidence: str, context: str | None = None) -> list[dict[str, str]]:
    """Do the statement and the evidence imply the same thing about what the evidence covers?"""
    system = (
        "You compare a statement with one piece of evidence. First write what the statement says about the "
        "topic of the evidence, then what the evidence says, then judge: 'agree' if the evidence implies the "
        "same, 'disagree' if it implies something different, 'irrelevant' if it does not address the "
        "statement. " + UNTRUSTED_NOTE
    )
    parts = ["Examples of the format:", _AGREEMENT_EXAMPLES, ""]
    if context:
        parts += ["Earlier text, only to resolve references such as 'he' or 'the city':", fence(context, "context"), ""]
    parts += [
        "Statement:", fence(statement, "statement"), "Evidence:", fence(evidence, "evidence"), "",
        "Answer with three lines starting 'Statement says:', 'Evidence says:' and 'Verdict:'.",
    ]  # fmt: skip
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}]


def edit_messages(statement: str, evidence: str, context: str | None = None) -> list[dict[str, str]]:
    """Name the span of the statement that disagrees with the evidence and its minimal fix."""
    system = (
        "You fix a statement so that it agrees with the evidence, changing as few words as possible and "
        "keeping everything the evidence does not contradict. First name the exact span of the statement to "
        "change, copied character for character, then the text that replaces it. " + UNTRUSTED_NOTE
    )
    parts = ["Examples of the format:", _EDIT_EXAMPLES, ""]
    if context:
        parts += ["Earlier text, only to resolve references:", fence(context, "context"), ""]
    parts += [
        "Statement:", fence(statement, "statement"), "Evidence:", fence(evidence, "evidence"), "",
        "Answer with two lines: 'Span: <text copied from the statement>' and 'Replacement: <new text>'.",
    ]  # fmt: skip
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}]


_VERDICT = re.compile(r"^\W*verdict\W*:?\s*\**\s*(agree|disagree|irrelevant)\b", re.IGNORECASE | re.MULTILINE)
_SPAN = re.compile(r"^\W*span\W*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_REPLACEMENT = re.compile(r"^\W*replacement\W*:[ \t]*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)


def parse_agreement(completion: str) -> str | None:
    """'agree', 'disagree' or 'irrelevant' from the last 'Verdict:' line; None if absent."""
    found = _VERDICT.findall(completion)
    return found[-1].lower() if found else None


def parse_edit(completion: str) -> tuple[str, str] | None:
    """(span, replacement) from the first 'Span:' and 'Replacement:' lines; quotes stripped."""
    span, replacement = _SPAN.search(completion), _REPLACEMENT.search(completion)
    if span is None or replacement is None:
        return None
    return _unquote(span.group(1)), _unquote(replacement.group(1))


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1]
    return text
