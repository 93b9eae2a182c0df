"""`engram chat` names a connection failure at once: the interrupt that ends the wait for a line is
sent again until the main thread has taken it (one that lands just before the read blocks only
sets Python's flag and wakes nothing), and stops once it has."""

from __future__ import annotations

import signal
import threading
import time

from engram_client import cli


def test_the_failure_interrupt_is_sent_again_until_the_main_thread_takes_it():
    error = RuntimeError("no agent 'Nobody'")
    seen: list[float] = []
    interrupt: cli._FailureInterrupt

    def handler(signum, frame):  # the first two are "lost": nothing takes them
        seen.append(time.monotonic())
        if len(seen) == 3:
            assert interrupt.taken(error) is error

    previous = signal.signal(signal.SIGINT, handler)
    try:
        interrupt = cli._FailureInterrupt()
        sender = threading.Thread(target=interrupt)
        sender.start()
        deadline = time.monotonic() + 10
        while sender.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)  # the main thread runs Python often: each signal is handled here
        sender.join(1)
        assert not sender.is_alive() and len(seen) == 3
        # taken: later interrupts are ignored until the chat ends and puts the handler back
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        interrupt.restore()
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_persons_own_ctrl_c_is_not_a_failure():
    interrupt = cli._FailureInterrupt()
    assert interrupt.taken(None) is None and not interrupt.heard.is_set()
    interrupt.restore()  # nothing was changed


def test_a_chat_started_with_sigint_ignored_gets_pythons_handler_while_it_runs():
    """A background job or `nohup` passes SIGINT on ignored: the interrupt would never arrive."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        interrupt = cli._FailureInterrupt()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        interrupt.restore()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
