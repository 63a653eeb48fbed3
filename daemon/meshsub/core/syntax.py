"""The text syntax of events and subscriptions, for humans, the CLI and telemetry.

Grammar (whitespace separates predicates; spaces around operators are allowed)::

    subscription := topic-filter (WS predicate)*
    alternatives := subscription (WS "|" WS subscription)*      a disjunction
    event        := topic (WS name "=" value)*
    predicate    := name ("=" | "==" | "!=" | "<" | "<=" | ">" | ">=") value
                  | name "=" ("[" | "(") value "," value ("]" | ")")   range
                  | name "^=" string                                   prefix
                  | name "in" "{" value ("," value)* "}"               membership
                  | name "?"                                           existence
    value        := integer | float | "true" | "false" | "quoted string" | bare-word

A topic is the first whitespace-delimited run of characters, or a quoted
string. A bare word is a run of characters other than whitespace and
``"=!<>^?,{}[]()``; it is an integer or a float if it reads as one
(``-3``, ``2.5``, ``1e+16``), a bool if it is ``true``/``false``, otherwise a
string (after ``^=`` it is always a string). ``inf``/``nan`` must be quoted.
``alternatives`` is a disjunction of subscriptions (at most ``MAX_ALTERNATIVES``):
an event matches it when it matches any alternative. The core's content model
has no disjunction (a ``Subscription`` is a conjunction), so a driver turns the
alternatives into one core subscription each (``meshsub.core.disjunction``).
Quoted strings take ``\\" \\\\ \\n \\t \\r \\b \\f \\/ \\uXXXX \\UXXXXXXXX``.

``format_*`` writes the canonical text: predicates in canonical order, strings
bare where that reads back the same, floats with ``repr`` (which round-trips),
so that ``parse(format(x)) == x`` always. Errors are ``ContentError`` naming
the 1-based column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from meshsub.core.content import ContentError, Event, Op, Predicate, Subscription, Value
from meshsub.core.predicates import SYMBOL_OPS
from meshsub.core.topics import validate_filter, validate_topic
from meshsub.core.values import check_name, check_value

MAX_TEXT_CHARS = 65536
MAX_ALTERNATIVES = 16
"""Alternatives of one disjunction at most (each becomes a core subscription)."""
ALT_SEP = "|"

_SPECIAL = frozenset('"=!<>^?,{}[]()')
_OPS = ("==", "!=", "<=", ">=", "^=", "=", "<", ">")
_PUNCT = frozenset("?,{}[]()")
_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_NONFINITE = frozenset({"inf", "infinity", "nan"})
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_FORMAT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_OP_SYMBOLS = {Op.EQ: "=", Op.NE: "!=", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">="}


class _PositionedError(ContentError):
    """A ``ContentError`` that already names its column."""


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word", "string", "op", "punct", "end"
    text: str  # the word, the decoded string, the operator or the punctuation
    col: int  # 1-based column of the first character
    spaced: bool  # whitespace (or start of text) precedes it


class _Lexer:
    """Turns the text after the topic into tokens, on demand, with one token of look-ahead."""

    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.what = what
        self.pos = 0
        self._peeked: _Token | None = None

    def error(self, col: int, message: str) -> ContentError:
        return _PositionedError(f"{self.what} at column {col}: {message}")

    def topic(self) -> tuple[str, int]:
        """The first token: a quoted string or a run of non-whitespace."""
        text = self.text
        self._skip_space()
        col = self.pos + 1
        if self.pos >= len(text):
            raise self.error(col, "expected a topic")
        if text[self.pos] == '"':
            return self._string(), col
        start = self.pos
        while self.pos < len(text) and not text[self.pos].isspace():
            self.pos += 1
        return text[start : self.pos], col

    def peek(self) -> _Token:
        if self._peeked is None:
            self._peeked = self._scan()
        return self._peeked

    def next(self) -> _Token:
        tok = self.peek()
        self._peeked = None
        return tok

    def _skip_space(self) -> bool:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1
        return self.pos > start

    def _scan(self) -> _Token:
        spaced = self._skip_space() or self.pos == 0
        text, pos = self.text, self.pos
        col = pos + 1
        if pos >= len(text):
            return _Token("end", "", col, spaced)
        ch = text[pos]
        if ch == '"':
            return _Token("string", self._string(), col, spaced)
        if ch in _PUNCT:
            self.pos += 1
            return _Token("punct", ch, col, spaced)
        if ch in _SPECIAL:
            for op in _OPS:
                if text.startswith(op, pos):
                    self.pos += len(op)
                    return _Token("op", op, col, spaced)
            raise self.error(col, f"unexpected {ch!r}")
        while self.pos < len(text) and not (
            text[self.pos].isspace() or text[self.pos] in _SPECIAL
        ):
            self.pos += 1
        return _Token("word", text[pos : self.pos], col, spaced)

    def _string(self) -> str:
        """A double-quoted string starting at ``pos``; returns the decoded text."""
        text = self.text
        start_col = self.pos + 1
        self.pos += 1
        out: list[str] = []
        while True:
            if self.pos >= len(text):
                raise self.error(start_col, "unterminated string")
            ch = text[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch != "\\":
                out.append(ch)
                self.pos += 1
                continue
            esc = text[self.pos + 1 : self.pos + 2]
            if esc in _ESCAPES:
                out.append(_ESCAPES[esc])
                self.pos += 2
            elif esc in ("u", "U"):
                width = 4 if esc == "u" else 8
                digits = text[self.pos + 2 : self.pos + 2 + width]
                if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                    raise self.error(self.pos + 1, f"\\{esc} needs {width} hex digits")
                code = int(digits, 16)
                if code > 0x10FFFF:
                    raise self.error(self.pos + 1, f"\\{esc}{digits} is beyond Unicode")
                out.append(chr(code))
                self.pos += 2 + width
            else:
                raise self.error(self.pos + 1, f"unknown escape \\{esc or 'at end of text'}")


def _word_value(tok: _Token, lex: _Lexer) -> Value:
    """Interpret a bare word: integer, float, bool, or else a string."""
    word = tok.text
    if word == "true":
        return True
    if word == "false":
        return False
    if word.lstrip("+-").lower() in _NONFINITE:
        raise lex.error(tok.col, f"{word!r} is not a finite number; quote it for a string")
    if _INT_RE.match(word):
        try:
            return int(word)
        except ValueError:
            raise lex.error(tok.col, f"integer {word[:20]}... is too long") from None
    if _FLOAT_RE.match(word):
        number = float(word)
        if number in (float("inf"), float("-inf")):
            raise lex.error(tok.col, f"number {word!r} is out of range")
        return number
    return word


def _value(lex: _Lexer, after: str) -> tuple[Value, _Token]:
    tok = lex.next()
    if tok.kind == "string":
        return tok.text, tok
    if tok.kind == "word":
        return _word_value(tok, lex), tok
    raise lex.error(tok.col, f"expected a value after {after}, found {_describe(tok)}")


def _describe(tok: _Token) -> str:
    return "end of text" if tok.kind == "end" else repr(tok.text)


def _expect(lex: _Lexer, punct: str, context: str) -> None:
    tok = lex.next()
    if tok.kind != "punct" or tok.text != punct:
        raise lex.error(tok.col, f"expected {punct!r} {context}, found {_describe(tok)}")


def _start(text: object, what: str) -> _Lexer:
    if not isinstance(text, str):
        raise ContentError(f"{what}: text must be a string, not {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise ContentError(f"{what}: text is longer than {MAX_TEXT_CHARS} characters")
    return _Lexer(text, what)


def _name(lex: _Lexer, tok: _Token, expected: str) -> str:
    if tok.kind != "word":
        raise lex.error(tok.col, f"expected {expected}, found {_describe(tok)}")
    if not tok.spaced:
        raise lex.error(tok.col, "expected whitespace before the next item")
    return tok.text


def _is_alt_sep(tok: _Token) -> bool:
    return tok.kind == "word" and tok.text == ALT_SEP and tok.spaced


def _one_subscription(lex: _Lexer) -> tuple[Subscription, _Token]:
    """A topic filter and its predicates, up to the end or a ``|`` (returned)."""
    topic, topic_col = lex.topic()
    try:
        topic = validate_filter(topic)
    except ContentError as exc:
        raise lex.error(topic_col, str(exc)) from None
    preds: list[Predicate] = []
    while (tok := lex.next()).kind != "end" and not _is_alt_sep(tok):
        name = _name(lex, tok, "an attribute name")
        try:
            preds.append(_predicate(lex, name))
        except _PositionedError:
            raise
        except ContentError as exc:
            raise lex.error(tok.col, str(exc)) from None
    try:
        return Subscription(topic, tuple(preds)), tok
    except ContentError as exc:
        raise lex.error(topic_col, str(exc)) from None


def parse_subscription(text: str) -> Subscription:
    """Parse ``topic-filter predicate...``; raises ``ContentError`` with the column."""
    lex = _start(text, "bad subscription")
    sub, tok = _one_subscription(lex)
    if tok.kind != "end":
        raise lex.error(tok.col, "a disjunction ('|') is not one subscription")
    return sub


def parse_alternatives(text: str) -> tuple[Subscription, ...]:
    """Parse ``subscription (| subscription)*``: the alternatives of a disjunction
    (one for a plain subscription); raises ``ContentError`` with the column."""
    lex = _start(text, "bad subscription")
    out: list[Subscription] = []
    while True:
        sub, tok = _one_subscription(lex)
        if sub in out:
            raise lex.error(tok.col, "an alternative is given twice")
        out.append(sub)
        if tok.kind == "end":
            return tuple(out)
        if len(out) >= MAX_ALTERNATIVES:
            raise lex.error(tok.col, f"at most {MAX_ALTERNATIVES} alternatives")


def _predicate(lex: _Lexer, name: str) -> Predicate:
    tok = lex.next()
    if tok.kind == "punct" and tok.text == "?":
        return Predicate(name, Op.EXISTS)
    if tok.kind == "word" and tok.text == "in":
        _expect(lex, "{", "after 'in'")
        members = [_value(lex, "'{' or ','")[0]]
        while (sep := lex.next()).text == "," and sep.kind == "punct":
            members.append(_value(lex, "','")[0])
        if sep.kind != "punct" or sep.text != "}":
            raise lex.error(sep.col, f"expected ',' or '}}' in the set, found {_describe(sep)}")
        return Predicate(name, Op.IN, members=tuple(members))
    if tok.kind != "op":
        raise lex.error(
            tok.col,
            f"expected an operator (= != < <= > >= ^= in ?) after {name!r}, found {_describe(tok)}",
        )
    if tok.text == "^=":
        arg = lex.next()
        if arg.kind not in ("word", "string"):
            raise lex.error(arg.col, f"expected a string prefix after '^=', found {_describe(arg)}")
        return Predicate(name, Op.PREFIX, prefix=arg.text)
    nxt = lex.peek()
    if tok.text in ("=", "==") and nxt.kind == "punct" and nxt.text in "[(":
        lex.next()
        lo, _ = _value(lex, repr(nxt.text))
        _expect(lex, ",", "between the range bounds")
        hi, _ = _value(lex, "','")
        close = lex.next()
        if close.kind != "punct" or close.text not in ("]", ")"):
            found = _describe(close)
            raise lex.error(close.col, f"expected ']' or ')' to end the range, found {found}")
        return Predicate(name, Op.RANGE, lo=lo, hi=hi, lo_closed=nxt.text == "[",
                         hi_closed=close.text == "]")
    value, _ = _value(lex, repr(tok.text))
    return Predicate(name, SYMBOL_OPS[tok.text], value=value)


def parse_event(text: str) -> Event:
    """Parse ``topic name=value...``; raises ``ContentError`` with the column."""
    lex = _start(text, "bad event")
    topic, topic_col = lex.topic()
    try:
        topic = validate_topic(topic)
    except ContentError as exc:
        raise lex.error(topic_col, str(exc)) from None
    attrs: dict[str, Value] = {}
    while (tok := lex.next()).kind != "end":
        name = _name(lex, tok, "an attribute name")
        if name in attrs:
            raise lex.error(tok.col, f"attribute {name!r} given twice")
        eq = lex.next()
        if eq.kind != "op" or eq.text != "=":
            raise lex.error(eq.col, f"expected '=' after {name!r}, found {_describe(eq)}")
        value, _ = _value(lex, "'='")
        try:
            attrs[check_name(name)] = check_value(value, f"attribute {name!r}")
        except ContentError as exc:
            raise lex.error(tok.col, str(exc)) from None
    try:
        return Event(topic, attrs)
    except ContentError as exc:
        raise lex.error(1, str(exc)) from None


# ------------------------------------------------------------------ formatting


def _quote(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in _FORMAT_ESCAPES:
            out.append(_FORMAT_ESCAPES[ch])
        elif not ch.isprintable():
            code = ord(ch)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _reads_as_other(word: str) -> bool:
    return (
        word in ("true", "false")
        or word.lstrip("+-").lower() in _NONFINITE
        or bool(_INT_RE.match(word) or _FLOAT_RE.match(word))
    )


def _is_bare(text: str) -> bool:
    return (
        bool(text)
        and text.isprintable()
        and not any(ch.isspace() or ch in _SPECIAL for ch in text)
        and not _reads_as_other(text)
    )


def format_value(value: Value) -> str:
    """Canonical text of one value (the inverse of the value grammar)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value if _is_bare(value) else _quote(value)
    if isinstance(value, int):
        return str(value)
    return repr(value)


def _format_topic(topic: str) -> str:
    bare = topic.isprintable() and not topic.startswith('"') and not any(c.isspace() for c in topic)
    return topic if bare else _quote(topic)


def format_predicate(p: Predicate) -> str:
    """Canonical text of one predicate."""
    if p.op in _OP_SYMBOLS:
        assert p.value is not None
        return f"{p.attr}{_OP_SYMBOLS[p.op]}{format_value(p.value)}"
    if p.op is Op.RANGE:
        assert p.lo is not None and p.hi is not None
        left = "[" if p.lo_closed else "("
        right = "]" if p.hi_closed else ")"
        return f"{p.attr}={left}{format_value(p.lo)},{format_value(p.hi)}{right}"
    if p.op is Op.PREFIX:
        assert p.prefix is not None
        return f"{p.attr}^={format_value(p.prefix)}"
    if p.op is Op.IN:
        return f"{p.attr} in {{{', '.join(format_value(m) for m in p.members)}}}"
    return f"{p.attr}?"


def format_subscription(sub: Subscription) -> str:
    """Canonical text; ``parse_subscription(format_subscription(s)) == s``."""
    return " ".join([_format_topic(sub.topic), *(format_predicate(p) for p in sub.predicates)])


def format_alternatives(subs: tuple[Subscription, ...]) -> str:
    """Canonical text of a disjunction; ``parse_alternatives`` reads it back."""
    return f" {ALT_SEP} ".join(format_subscription(s) for s in subs)


def format_event(event: Event) -> str:
    """Canonical text; ``parse_event(format_event(e)) == e``."""
    parts = [_format_topic(event.topic)]
    parts.extend(f"{name}={format_value(value)}" for name, value in event.attrs.items())
    return " ".join(parts)
