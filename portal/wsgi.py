import os

from django.core.wsgi import get_wsgi_application

from portal.env import exit_on_bad_settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
exit_on_bad_settings()
application = get_wsgi_application()
