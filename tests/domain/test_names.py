"""The naming rules (headgate._domain.names): what each sort of name refuses, and
how the refusal points at a character an operator cannot see."""

from __future__ import annotations

import pytest

from headgate._domain.ids import fingerprint_of_text
from headgate._domain.names import (
    fingerprint_problem,
    identifier_problem,
    label_problem,
)

INVISIBLE = [
    ("abc\n", "U+000A (a control character) at index 3"),
    ("abc\r\n", "U+000D (a control character) at index 3"),
    ("a\tb", "U+0009 (a control character) at index 1"),
    ("a\x00", "U+0000 (a control character) at index 1"),
    ("a\x1b[2J", "U+001B (a control character) at index 1"),
    ("a\x7f", "U+007F (a control character) at index 1"),
    ("a\x85", "U+0085 (a control character) at index 1"),
    ("a\u200b", "U+200B (ZERO WIDTH SPACE) at index 1"),
    ("a\u200db", "U+200D (ZERO WIDTH JOINER) at index 1"),
    ("a\u202eb", "U+202E (RIGHT-TO-LEFT OVERRIDE) at index 1"),
    ("\ufeffa", "U+FEFF (ZERO WIDTH NO-BREAK SPACE) at index 0"),
    ("a\u00adb", "U+00AD (SOFT HYPHEN) at index 1"),
    ("a\u2028b", "U+2028 (LINE SEPARATOR) at index 1"),
    ("a\u2029b", "U+2029 (PARAGRAPH SEPARATOR) at index 1"),
    ("a\u00a0b", "U+00A0 (NO-BREAK SPACE) at index 1"),
    ("a\u3000b", "U+3000 (IDEOGRAPHIC SPACE) at index 1"),
    ("a\ud800", "U+D800 (a lone surrogate) at index 1"),
    ("a\ue000", "U+E000 (a private-use character) at index 1"),
]


@pytest.mark.parametrize(("value", "where"), INVISIBLE, ids=[repr(v) for v, _ in INVISIBLE])
def test_a_label_refuses_every_control_and_invisible_character_and_says_which(
    value: str, where: str
) -> None:
    assert label_problem(value, 128) == (
        f"must not contain control or invisible characters; found {where}"
    )


@pytest.mark.parametrize(("value", "where"), INVISIBLE, ids=[repr(v) for v, _ in INVISIBLE])
def test_an_identifier_refuses_them_too_naming_the_character(value: str, where: str) -> None:
    problem = identifier_problem(value, 128)
    assert problem is not None
    assert problem.startswith("may contain only letters, digits and . _ : - and must start")
    assert problem.endswith(f"; found {where}")


@pytest.mark.parametrize("value", [" kind", "kind ", " ", "a b "])
def test_a_label_refuses_a_space_at_either_end(value: str) -> None:
    assert label_problem(value, 128) == "must not start or end with a space"


@pytest.mark.parametrize("value", ["email.send", "report build", "Ünïcode", "日本語", "a-b_c:d"])
def test_a_label_takes_printable_text_with_inner_spaces(value: str) -> None:
    assert label_problem(value, 128) is None


@pytest.mark.parametrize(
    ("value", "composed"),
    [("cafe\u0301", "caf\u00e9"), ("\u212b", "\u00c5"), ("\u1100\u1161", "\uac00")],
)
def test_a_label_is_in_normal_form_nfc_so_it_has_one_spelling(value: str, composed: str) -> None:
    """`café` with a combining accent looks like the composed one; so do Hangul
    jamo and their syllable, and the Angstrom sign and Å."""
    assert label_problem(value, 128) == (
        f"must be in Unicode normal form NFC (composed, as text is usually typed): "
        f"write {composed!r}"
    )
    assert label_problem(composed, 128) is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", "must be 1-128 characters, got 0"),
        ("k" * 129, "must be 1-128 characters, got 129"),
        (7, "must be a string, got int"),
        (None, "must be a string, got NoneType"),
    ],
)
def test_lengths_and_types_come_first(value: object, problem: str) -> None:
    assert label_problem(value, 128) == problem
    assert identifier_problem(value, 128) == problem


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("a b", "U+0020 (SPACE) at index 1"),
        (".hidden", "'.' (U+002E) at index 0"),
        ("café", "'é' (U+00E9) at index 3"),
        ("a/b", "'/' (U+002F) at index 1"),
    ],
)
def test_an_identifier_names_the_first_character_outside_its_set(value: str, found: str) -> None:
    problem = identifier_problem(value, 128)
    assert problem is not None and problem.endswith(f"; found {found}")


@pytest.mark.parametrize("value", ["nightly", "tenant-7.digest", "a:b_c", "0"])
def test_an_identifier_takes_its_set(value: str) -> None:
    assert identifier_problem(value, 128) is None


def test_a_fingerprint_is_what_headgate_makes_and_nothing_else() -> None:
    made = fingerprint_of_text("mail.send", '{"to":"x"}')
    assert fingerprint_problem(made) is None
    for wrong in ("zzz", "abc", made.upper(), made[:-1], made + "0", made + "\n", f" {made}"):
        assert fingerprint_problem(wrong) == (
            "must be 32 lowercase hexadecimal digits, as Headgate shows a job's fingerprint "
            "(GET /api/v1/jobs/{id}, headgate jobs show)"
        ), wrong
    assert fingerprint_problem(None) == "must be a string, got NoneType"
