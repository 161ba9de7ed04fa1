from ralph.escapes import strip_escapes


def test_colour_codes_are_removed() -> None:
    text = "\x1b[1m\x1b[31mFAILED\x1b[0m tests/test_a.py::test_x - \x1b[91massert 1 == 2\x1b[0m"
    assert strip_escapes(text) == "FAILED tests/test_a.py::test_x - assert 1 == 2"


def test_title_clear_screen_and_cursor_moves_are_removed() -> None:
    text = "a\x1b]0;owned\x07b\x1b[2Jc\x1b[10;5Hd\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\e"
    assert strip_escapes(text) == "abcdlinke"


def test_control_characters_go_but_lines_stay() -> None:
    assert strip_escapes("one\r\ntwo\rthree\tfour\x07\x08\x00") == "one\ntwo\nthree\tfour"


def test_plain_text_is_unchanged() -> None:
    text = "plain text, ünïcode ✓\nsecond line"
    assert strip_escapes(text) is text


def test_eight_bit_introducers_are_removed() -> None:
    assert strip_escapes("x\x9b31my\x9d0;t\x9cz") == "xyz"


def test_a_sequence_cut_by_a_read_boundary_is_held_until_its_end() -> None:
    from ralph.escapes import StreamCleaner

    cleaner = StreamCleaner()
    parts = ["FAIL\x1b[9", "1mED\x1b", "[0m one\r", "\ntwo\x1b]0;ti", "tle\x07 end"]
    out = "".join(cleaner.feed(part) for part in parts) + cleaner.flush()
    assert out == "FAILED one\ntwo end"


def test_an_unfinished_sequence_at_the_end_of_a_stream_is_dropped() -> None:
    from ralph.escapes import StreamCleaner

    cleaner = StreamCleaner()
    assert cleaner.feed("done\x1b[3") == "done"
    assert cleaner.flush() == ""


def test_a_colour_code_cut_off_by_the_end_of_the_text_goes_whole() -> None:
    assert strip_escapes("passed\x1b[3") == "passed"
