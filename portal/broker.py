"""kombu's filesystem transport with atomic message files (the broker of ``make run``).

kombu 5.x writes a message by creating ``<time>_<uuid>.<queue>.msg`` and then writing into
it; a worker listing the folder in between moves the still-empty file away, reads ``b""`` and
dies with ``JSONDecodeError`` ("Unrecoverable error"), which stops the demo's loop after a
minute or two. Here a message is written under a name the readers ignore and renamed into
place when complete (``os.replace`` is atomic on one filesystem), so a reader sees a whole
message or none. Selected by ``CELERY_BROKER_TRANSPORT`` in the settings when the broker URL
is ``filesystem://``."""

from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + ".part"  # readers only take names ending in ".<queue>.msg"
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel

    @property
    def default_connection_params(self):
        return {}  # no host to connect to: spares a "No hostname was supplied" warning per task
