"""A real SMTP server in the test process (aiosmtpd) and Celery tasks run eagerly, so a
notification's email goes through Django's SMTP backend to a socket and is read back.

Registered for the whole suite by tests/conftest.py."""

import email
import socket
from email.policy import default as default_policy
from types import SimpleNamespace

import pytest
from aiosmtpd.controller import Controller


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Inbox:
    """What the SMTP server received: (recipients, parsed message) in order."""

    def __init__(self):
        self.received = []

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content, policy=default_policy)
        self.received.append(SimpleNamespace(
            to=list(envelope.rcpt_tos), subject=message["Subject"],
            body=message.get_body(("plain",)).get_content(),
        ))
        return "250 OK"


@pytest.fixture
def eager_tasks():
    from portal.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


@pytest.fixture
def smtp(settings, eager_tasks):
    """A live SMTP server the email backend sends to; `smtp.received` lists what arrived."""
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.EMAIL_USE_TLS = False
    settings.TIMESHARE_BASE_URL = "https://timeshare.example.org"
    yield inbox
    controller.stop()


@pytest.fixture
def dead_smtp(settings, eager_tasks):
    """A mail server that is down: nothing listens on the port."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_TIMEOUT = 2
