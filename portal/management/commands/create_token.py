"""manage.py create_token USER [--name NAME] [--days N]: print a new API token of USER."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from portal.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token for a user and print it (it is shown only once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="created by manage.py create_token")
        parser.add_argument("--days", type=int, help="expires after this many days")

    def handle(self, *args, username, name, days, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        if days is not None and days < 1:
            raise CommandError("--days must be at least 1.")
        token, key = ApiToken.objects.create_token(user, name)
        if days:
            token.expires = timezone.now() + timedelta(days=days)
            token.save(update_fields=["expires"])
        self.stdout.write(key)
