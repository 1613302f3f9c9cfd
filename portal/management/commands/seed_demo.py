from django.core.management.base import BaseCommand

from portal import demo


class Command(BaseCommand):
    help = "Create the demo institute (users, clusters, budget tree); safe to run again."

    def handle(self, *args, **options):
        people = demo.seed()
        self.stdout.write(self.style.SUCCESS("Demo organisation ready. Logins (password "
                                             f"'{demo.DEMO_PASSWORD}'):"))
        for username, description in people.items():
            self.stdout.write(f"  {username:<15} {description}")
