"""A deterministic stand-in for Claude, for the local stack and tests when no key is set.

It answers from the conversation it is given (so history is visibly carried between turns) and
calls registered tools whose `offline_intent` recognises the user's words, so memory features
can be shown without a key. It reads what a real model is told to read: the person's words are
the text blocks they sent, not the context Engram appends after them (the memory stored since,
a late summary fold), and, as extractor and summariser, only the `user` lines of the JSON Lines
transcript (extraction.prompt), never what the assistant or a tool said.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engram.engine.prompt import DELTA_HEADING, LATE_SUMMARY_HEADING
from engram.engine.providers.base import ModelResponse, TokenCounts

Intents = Callable[[], dict[str, Callable[[str], dict[str, Any] | None]]]


# The blocks Engram appends after the person's words in the turn's message (engine.turn): context
# to read as data, not something the person said.
_CONTEXT_HEADINGS = (DELTA_HEADING, LATE_SUMMARY_HEADING)


def _text_of(message: dict[str, Any]) -> str:
    """The person's own text blocks of a message."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(
        b.get("text", "")
        for b in content or []
        if b.get("type") == "text" and not b.get("text", "").startswith(_CONTEXT_HEADINGS)
    )


def _is_tool_result(message: Mapping[str, object]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


_ABOUT_ME = re.compile(r"what do you (?:know|remember) about me", re.I)


def _fenced(system: Sequence[Mapping[str, object]], scope: str, newest: dict[str, Any] | None = None) -> list[str]:
    """The entries of the memory fences of a scope in the system prompt and in the newest
    message (memory stored since the session's snapshot): how the offline model 'reads' memory."""
    blocks = [*system, *(newest or {}).get("content", [])] if isinstance((newest or {}).get("content"), list) else system
    text = "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict))
    lines = []
    for match in re.finditer(rf'<memory scope="{scope}">\n(.*?)\n</memory>', text, re.S):
        for line in match.group(1).splitlines():
            quoted = re.search(r'"((?:[^"\\]|\\.)*)"', line)
            lines.append("- " + (json.loads(f'"{quoted.group(1)}"') if quoted else line.lstrip("- ")))
    return lines


def _estimate_tokens(payload: object) -> int:
    return max(1, len(json.dumps(payload, ensure_ascii=False)) // 4)


class OfflineProvider:
    name = "offline"

    def __init__(self, intents: Intents | None = None):
        self._intents = intents or (lambda: {})

    def complete(
        self,
        *,
        model: str,
        system: list[dict[str, object]],
        tools: list[dict[str, object]],
        messages: list[dict[str, object]],
        max_tokens: int,
        timeout: float,
        tool_choice: dict[str, object] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> ModelResponse:
        response = self._answer(system=system, tools=tools, messages=messages, tool_choice=tool_choice)
        if on_text is not None:
            _stream_text(response.content, on_text)
        return response

    def _answer(
        self,
        *,
        system: list[dict[str, object]],
        tools: list[dict[str, object]],
        messages: list[dict[str, object]],
        tool_choice: Mapping[str, object] | None,
    ) -> ModelResponse:
        forced = (tool_choice or {}).get("name") if (tool_choice or {}).get("type") == "tool" else None
        if forced in (EXTRACTION_TOOL, SUMMARY_TOOL):
            # The extraction and summary workers force their tool: answered from the prompt alone.
            prompt = _text_of(messages[-1])
            tool_input = extract_offline(prompt, tools) if forced == EXTRACTION_TOOL else {"summary": summarise_offline(prompt)}
            digest = hashlib.sha256(json.dumps(tool_input, sort_keys=True).encode()).hexdigest()[:20]
            content = [{"type": "tool_use", "id": f"toolu_offline_{digest}", "name": forced, "input": tool_input}]
            return ModelResponse(
                content=content,
                stop_reason="tool_use",
                model="offline",
                tokens=TokenCounts(
                    input_tokens=_estimate_tokens([system, tools, messages]), output_tokens=_estimate_tokens(content)
                ),
            )
        last = messages[-1]
        may_call = (tool_choice or {}).get("type") != "none"
        # Decision tools: get_my_decisions first, submit_result before the final answer (AM5).
        first, final = _decision_calls(tools, messages) if may_call else (None, None)
        # The tools the turn's opening message asks for, each once per turn (after get_my_decisions).
        opening, turn = _this_turn(messages)
        wanted = self._pick_tools(opening, tools) if may_call and opening else []
        intent = next((call for call in wanted if not _calls_in(turn, call[0])[0]), None)
        if _is_tool_result(last) and not final and not intent:
            answer = self._summarise_results(messages)
            if _only_decision_tools(turn):
                # The card was submitted; the person's own message still gets its answer.
                answer = self._reply(opening, messages[: len(messages) - len(turn)], system) + "\n" + answer
            content, stop = [{"type": "text", "text": answer}], "end_turn"
        else:
            text = _text_of(last) if not _is_tool_result(last) else ""
            call = first or intent or final
            if call:
                # MCP tools the user named are asked for together, in one answer (they run in parallel).
                calls = [call]
                if intent is not None and call is intent and intent[0].startswith("mcp__"):
                    calls = [c for c in wanted if c[0].startswith("mcp__") and not _calls_in(turn, c[0])[0]]
                # Deterministic, yet unique within the conversation it is sent in.
                seen = json.dumps(messages, sort_keys=True, ensure_ascii=False)
                content = [{"type": "text", "text": f"Let me use {', '.join(name for name, _ in calls)}."}]
                for name, tool_input in calls:
                    digest = hashlib.sha256(f"{seen}:{name}".encode()).hexdigest()[:20]
                    content.append({"type": "tool_use", "id": f"toolu_offline_{digest}", "name": name, "input": tool_input})
                stop = "tool_use"
            else:
                content, stop = [{"type": "text", "text": self._reply(text, messages, system)}], "end_turn"
        return ModelResponse(
            content=content,
            stop_reason=stop,
            model="offline",
            tokens=TokenCounts(input_tokens=_estimate_tokens([system, tools, messages]), output_tokens=_estimate_tokens(content)),
        )

    def _pick_tools(self, text: str, tools: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        intents = self._intents()
        found = []
        for spec in tools:
            intent = intents.get(spec["name"])
            tool_input = intent(text) if intent is not None else None
            if tool_input is not None:
                found.append((spec["name"], tool_input))
        return found + _named_tool_calls(text, tools)

    @staticmethod
    def _summarise_results(messages: list[dict[str, Any]]) -> str:
        names = {}
        for message in messages:
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    names[block["id"]] = block["name"]
        parts = []
        for block in messages[-1]["content"]:
            if block.get("type") != "tool_result":
                continue
            result = block.get("content")
            shown = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
            prefix = "failed" if block.get("is_error") else "returned"
            parts.append(f"{names.get(block.get('tool_use_id'), 'the tool')} {prefix}: {shown[:600]}")
        return "(offline model) Done. " + " ".join(parts)

    @staticmethod
    def _reply(text: str, messages: list[dict[str, object]], system: Sequence[Mapping[str, object]]) -> str:
        if _ABOUT_ME.search(text):
            facts = _fenced(system, "user", messages[-1] if messages else None)
            if not facts:
                return '(offline model) I don\'t know anything about you yet. Tell me, e.g. "remember that I prefer tea".'
            return "(offline model) Here is what I know about you:\n" + "\n".join(facts)
        earlier = [_text_of(m) for m in messages[:-1] if m.get("role") == "user" and not _is_tool_result(m)]
        reply = f'(offline model) You said: "{text[:300]}".'
        if earlier:
            reply += f' This session has {len(earlier)} earlier message(s) from you; the first was: "{earlier[0][:200]}".'
        else:
            reply += " This is the first message of this session."
        return reply


# The offline model streams its text as a model does: a few words at a time.
OFFLINE_CHUNK_CHARS = 24


def _stream_text(content: list[dict[str, Any]], on_text: Callable[[str], None]) -> None:
    texts = [b["text"] for b in content if b.get("type") == "text" and b.get("text")]
    for i, text in enumerate(texts):
        if i:
            on_text("\n")
        for start in range(0, len(text), OFFLINE_CHUNK_CHARS):
            on_text(text[start : start + OFFLINE_CHUNK_CHARS])


# --- tools named by the user ------------------------------------------------------------------
# "use lookup_price for BTC", "use search_tickets with login": a tool the turn offers, named by its
# own name or by the part after `mcp__<connection>__`, called with the words after for/with/on in
# its first required field (an agent's MCP tools, shown without a key).
_USE_TOOL = re.compile(r"\buse\s+([A-Za-z0-9_-]+)\s+(?:for|with|on|about)\s+(.+?)(?=[.!?]\s|[.!?]?$|\s+and\s+use\b)", re.I)


def _named_tool_calls(text: str, tools: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for match in _USE_TOOL.finditer(text):
        wanted, argument = match.group(1), match.group(2).strip().strip("\"'")
        spec = next((t for t in tools if t["name"] == wanted or str(t["name"]).endswith(f"__{wanted}")), None)
        if spec is None:
            continue
        schema = spec.get("input_schema") or {}
        properties = schema.get("properties") or {}
        first = next(iter(schema.get("required") or list(properties)), None)
        calls.append((spec["name"], {first: _as_type(argument, (properties.get(first) or {}).get("type"))} if first else {}))
    return calls


def _as_type(text: str, kind: object) -> object:
    """The user's words as the schema's type: a number where it wants one, else the text."""
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
    except ValueError:
        pass
    return text


# --- decision tools -------------------------------------------------------------------------------
# The decision tools' names (cards.tools): the engine does not import features, so they are named here.
GET_MY_DECISIONS = "get_my_decisions"
SUBMIT_RESULT = "submit_result"


def _this_turn(messages: list[dict[str, object]]) -> tuple[str, list[dict[str, Any]]]:
    """The user's message that opened this turn and everything after it."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "user" and not _is_tool_result(m):
            return _text_of(m), messages[i + 1 :]
    return "", list(messages)


def _calls_in(turn: list[dict[str, Any]], name: str) -> tuple[int, bool]:
    """How often `name` was called this turn, and whether one of its calls succeeded."""
    ids = {
        b["id"]
        for m in turn
        for b in m.get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == name
    }
    ok = any(
        b.get("tool_use_id") in ids and not b.get("is_error")
        for m in turn
        for b in m.get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )
    return len(ids), ok


def _decision_calls(tools: list[dict[str, Any]], messages: list[dict[str, object]]) -> tuple[Any, Any]:
    """(call to make before anything else, call to make before answering) for this turn."""
    names = {t["name"]: t for t in tools}
    text, turn = _this_turn(messages)
    first: tuple[str, dict[str, Any]] | None = None
    final: tuple[str, dict[str, Any]] | None = None
    if GET_MY_DECISIONS in names and _calls_in(turn, GET_MY_DECISIONS)[0] == 0:
        first = (GET_MY_DECISIONS, {})
    if SUBMIT_RESULT in names:
        tries, done = _calls_in(turn, SUBMIT_RESULT)
        if not done and tries < 2:
            final = (SUBMIT_RESULT, offline_card(names[SUBMIT_RESULT]["input_schema"], text))
    return first, final


def _only_decision_tools(turn: list[dict[str, Any]]) -> bool:
    """Whether every tool this turn called was a decision tool (get_my_decisions, submit_result)."""
    names = {b.get("name") for m in turn for b in m.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"}
    return bool(names) and names <= {GET_MY_DECISIONS, SUBMIT_RESULT}


def offline_card(schema: dict[str, Any], text: str) -> dict[str, object]:
    """A deterministic card that satisfies a submit_result schema: the first enum value, the
    midpoint of numeric bounds, and short strings taken from the user's message."""
    words = re.findall(r"[A-Za-z0-9]+", text) or ["offline"]
    card: dict[str, Any] = {}
    for name in schema.get("required", []):
        prop = schema.get("properties", {}).get(name, {})
        kind = prop.get("type")
        if "enum" in prop:
            card[name] = prop["enum"][0]
        elif kind in ("number", "integer"):
            low, high = prop.get("minimum"), prop.get("maximum")
            value = (
                (low + high) / 2
                if low is not None and high is not None
                else (low if low is not None else (high if high is not None else 0))
            )
            card[name] = int(value) if kind == "integer" else value
        elif kind == "boolean":
            card[name] = False
        elif "pattern" in prop:
            card[name] = "HOLD"  # the offline model's one uppercase word (e.g. a re-examination's action)
        else:
            limit = int(prop.get("maxLength", 200))
            value = words[0].upper() if limit <= 40 else "offline: " + " ".join(words)
            card[name] = value[:limit]
    return card


# --- memory extraction ------------------------------------------------------------------------
# The extraction worker forces this tool (engram/extraction/prompt.py); offline, facts come from a few
# explicit phrasings of the user, so the local stack shows `auto:` rows without a key.
EXTRACTION_TOOL = "record_memories"
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+|;\s*|,\s+(?:and|but|so)\s+", re.I)  # one fact per clause
_CLAUSE = r"[^.!?;\n]"
_FACT_PATTERNS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], tuple[str, str]], str, float]] = [
    (
        re.compile(rf"\bI (?:really |much |strongly |usually |always )?prefer (?P<x>{_CLAUSE}{{2,160}})", re.I),
        lambda m: ("preference-" + " ".join(m["x"].split()[:4]), f"The user prefers {m['x'].strip()}."),
        "agent",
        0.9,
    ),
    (
        re.compile(rf"\bwe(?: now| always| mostly)? (?:use|are using|'re using|rely on) (?P<x>{_CLAUSE}{{2,160}})", re.I),
        lambda m: ("uses " + " ".join(m["x"].split()[:4]), f"The team uses {m['x'].strip()}."),
        "workspace",
        0.85,
    ),
    (
        re.compile(rf"\bour (?P<a>[\w' -]{{2,40}}?) (?P<verb>is|are) (?P<b>{_CLAUSE}{{1,160}})", re.I),
        lambda m: (m["a"], f"Our {m['a'].strip()} {m['verb'].lower()} {m['b'].strip()}."),
        "workspace",
        0.85,
    ),
    (
        re.compile(rf"\bmy (?P<a>[\w' -]{{2,40}}?) is (?P<b>{_CLAUSE}{{1,160}})", re.I),
        lambda m: ("user " + m["a"], f"The user's {m['a'].strip()} is {m['b'].strip()}."),
        "agent",
        0.9,
    ),
]


def _between(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    return match.group(1) if match else ""


def _json_lines(text: str) -> list[object]:
    """The JSON values of a fenced block, one a line; a line that is not one is skipped. Split on
    "\\n" only: the lines are written by kernel.fencing.data_json, which escapes every other break."""
    values = []
    for line in text.split("\n"):
        try:
            values.append(json.loads(line))
        except ValueError:
            continue
    return values


def _transcript(prompt: str) -> list[dict[str, object]]:
    """The objects of the prompt's `<transcript>` (extraction.prompt.render_transcript)."""
    return [v for v in _json_lines(_between(prompt, "transcript")) if isinstance(v, dict)]


def _user_chunks(prompt: str) -> list[str]:
    """The person's own messages: the `text` of the transcript's `user` lines, and nothing else."""
    return [str(m.get("text", "")) for m in _transcript(prompt) if m.get("role") == "user" and "text" in m]


def extract_offline(prompt: str, tools: list[dict[str, Any]]) -> dict[str, object]:
    """Deterministic facts from "I prefer ...", "we use ...", "our ... is/are ...", "my ... is ..."
    in the user's own lines; a fact whose key already holds a different value supersedes it."""
    existing: dict[str, str] = {}
    for row in _json_lines(_between(prompt, "existing")):
        if isinstance(row, dict) and isinstance(row.get("key"), str) and isinstance(row.get("value"), str):
            existing[row["key"]] = row["value"]
    scopes = ["agent"]
    for spec in tools:
        if spec.get("name") == EXTRACTION_TOOL:
            item = spec["input_schema"]["properties"]["facts"]["items"]
            scopes = item["properties"]["scope"].get("enum", scopes)
    facts: dict[str, dict[str, Any]] = {}  # by slug: a later statement wins
    for chunk in _user_chunks(prompt):
        for sentence in _SENTENCE.split(chunk):
            for pattern, shape, scope, confidence in _FACT_PATTERNS:
                match = pattern.search(sentence)
                if not match:
                    continue
                slug, value = shape(match)
                slug = re.sub(r"[^a-z0-9]+", "-", slug.lower()).strip("-")[:60].strip("-")
                key = f"auto:{slug}"
                old = existing.get(key)
                supersedes = key if old is not None and old.strip().lower() != value.strip().lower() else None
                facts.pop(slug, None)
                facts[slug] = {
                    "slug": slug,
                    "value": value,
                    "scope": scope if scope in scopes else scopes[0],
                    "confidence": confidence,
                    "supersedes": supersedes,
                }
                break
    return {"facts": list(facts.values())[-5:]}


# --- session summaries ----------------------------------------------------------------------------
# The summary worker (summaries.service) forces this tool; offline, the summary of the cut messages
# is the first sentence of each user message with the tools the agent used for it, labelled once.
SUMMARY_TOOL = "record_summary"
SUMMARY_LABEL = "(offline summary: the first sentence of each user message, with the tools used)"
_CONDENSED_CHARS = 1_600  # about summaries.service.CONDENSED_TOKENS
_FIRST_SENTENCE = re.compile(r"^(.+?[.!?])(?:\s|$)", re.S)


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = _FIRST_SENTENCE.match(text)
    return (match.group(1) if match else text)[:200]


def _summary_lines(prompt: str) -> list[str]:
    """The summary so far of a fold or condense prompt (one JSON string a line)."""
    return [v for v in _json_lines(_between(prompt, "summary")) if isinstance(v, str) and v]


def summarise_offline(prompt: str) -> str:
    """Deterministic: a new part for the `<transcript>` of a fold prompt (the first sentence of
    each `user` line, with the tools the agent called after it; what the agent and the tools said
    is left out); for a `<condense>` prompt, the label and the newest lines of the summary within
    about 400 tokens (the label only when the summary had it: a condensation that keeps the
    summary's opening sends the rest)."""
    if prompt.startswith("<condense>"):
        given = _summary_lines(prompt)
        label = [SUMMARY_LABEL] if SUMMARY_LABEL in given else []
        lines = [line for line in given if line != SUMMARY_LABEL]
        kept: list[str] = []
        for line in reversed(lines):
            if len("\n".join([*label, line, *kept])) > _CONDENSED_CHARS:
                break
            kept.insert(0, line)
        return "\n".join([*label, *kept])
    out: list[str] = [] if _summary_lines(prompt) else [SUMMARY_LABEL]
    said: str | None = None
    used: list[str] = []

    def flush() -> None:
        if said is not None:
            out.append(f"User: {said}" + (f" (tools used: {', '.join(used)})" if used else ""))

    for part in _transcript(prompt):
        if part.get("role") == "user" and "text" in part:
            flush()
            said, used = _first_sentence(str(part["text"])), []
        elif part.get("role") == "assistant" and "tool_call" in part:
            name = str(part["tool_call"])
            if name not in used:
                used.append(name)
    flush()
    return "\n".join(out) or SUMMARY_LABEL
