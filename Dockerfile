FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 TIMESHARE_VAR_DIR=/var/lib/timeshare
WORKDIR /app
COPY pyproject.toml README.md ./
COPY portal portal
COPY budgets budgets
COPY scheduler scheduler
COPY fleet fleet
COPY common common
RUN pip install --no-cache-dir .
COPY . .
RUN mkdir -p /var/lib/timeshare && SECRET_KEY=build-only-key-build-only-key-build-only python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
